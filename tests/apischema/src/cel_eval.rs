//! One CEL rule compiled and run on kube-cel's Kubernetes CEL library, with `type()` and `dyn()` added.
//!
//! kube-cel's `Validator` is not used to run rules: its CEL environment is
//! closed, and `cel` 0.13 has no `type()` (so `type(self) == int ? ... : ...`,
//! the usual int-or-string rule, cannot be evaluated there); it also binds
//! `oldSelf` to `null` instead of an optional for `optionalOldSelf` rules.
//! The environment here is `cel`'s standard one plus every kube-cel library
//! (`KubeCelExt::register_all`), `type()`/`dyn()` and the type identifiers.

use std::cell::RefCell;
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;
use std::sync::Arc;

use kube_cel::KubeCelExt;
use kube_cel::cel::extractors::This;
use kube_cel::cel::objects::{Opaque, OptionalValue, ValueType};
use kube_cel::cel::{Context, ExecutionError, FunctionContext, Program, Value as CelValue};

/// Longest `messageExpression` result the apiserver accepts (bytes).
const MAX_MESSAGE_LEN: usize = 5 * 1024;

/// The CEL type names `type()` returns and the identifiers that denote them.
const TYPE_NAMES: [&str; 10] = [
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
];

/// A CEL type as a value (`type(1) == int`); equal only to the same type.
#[derive(Debug, PartialEq, Eq)]
struct CelType(String);

impl Opaque for CelType {
    fn runtime_type_name(&self) -> &str {
        "type"
    }
}

fn type_value(name: &str) -> CelValue {
    CelValue::Opaque(Arc::new(CelType(name.to_owned())))
}

/// `type(x)`.
fn type_of(value: CelValue) -> Result<CelValue, ExecutionError> {
    let name = match value.type_of() {
        ValueType::List => "list",
        ValueType::Map => "map",
        ValueType::Function => "function",
        ValueType::Int => "int",
        ValueType::UInt => "uint",
        ValueType::Float => "double",
        ValueType::String => "string",
        ValueType::Bytes => "bytes",
        ValueType::Bool => "bool",
        ValueType::Duration => "google.protobuf.Duration",
        ValueType::Timestamp => "google.protobuf.Timestamp",
        ValueType::Null => "null_type",
        ValueType::Opaque => match &value {
            CelValue::Opaque(o) => return Ok(type_value(o.runtime_type_name())),
            _ => "opaque",
        },
    };
    Ok(type_value(name))
}

/// `dyn(x)`: the identity at runtime.
fn dyn_of(value: CelValue) -> Result<CelValue, ExecutionError> {
    Ok(value)
}

thread_local! {
    static REGEXES: crate::pattern::Compiled = RefCell::new(HashMap::new());
}

/// `matches`, as `cel`'s own (Rust regex syntax, unanchored, the same error), but each
/// pattern compiled once per thread: `cel` compiles it at every call, and the CRDs'
/// image reference rule is a large pattern checked on every BootcNode write.
fn matches(
    ftx: &FunctionContext,
    This(this): This<Arc<String>>,
    regex: Arc<String>,
) -> Result<bool, ExecutionError> {
    let compile = |pattern: &str| regex::Regex::new(pattern).map_err(|e| e.to_string());
    crate::pattern::with_compiled(&REGEXES, &regex, compile, |compiled| match compiled {
        Ok(re) => Ok(re.is_match(&this)),
        Err(err) => Err(ftx.error(format!("'{regex}' not a valid regex:\n{err}"))),
    })
}

fn base_context() -> Context<'static> {
    let mut ctx = Context::default().with_all();
    ctx.add_function("type", type_of);
    ctx.add_function("dyn", dyn_of);
    ctx.add_function("matches", matches);
    for name in TYPE_NAMES {
        ctx.add_variable_from_value(name, type_value(name));
    }
    ctx
}

thread_local! {
    static BASE: Context<'static> = base_context();
}

/// A rule ready to run.
#[derive(Debug)]
pub(crate) struct CompiledRule {
    program: Program,
    message: Option<Program>,
    uses_old_self: bool,
}

/// What running a rule gave.
#[derive(Debug, PartialEq)]
pub(crate) enum CelOutcome {
    /// The rule held.
    Pass,
    /// The rule was false; carries the `messageExpression` result if there
    /// is a usable one.
    Fail(Option<String>),
    /// A transition rule without an old value: not evaluated.
    Skipped,
    /// The rule gave a non-boolean value of this type.
    NotBool(String),
    /// Evaluation failed with this error.
    Error(String),
}

/// At most this many rules are kept compiled per thread (then the cache starts over).
const RULE_CACHE_LIMIT: usize = 1024;

/// A rule and its `messageExpression`, compiled.
type Compiled = Rc<Result<CompiledRule, String>>;

thread_local! {
    static RULES: RefCell<HashMap<(String, Option<String>), Compiled>> =
        RefCell::new(HashMap::new());
}

/// [`compile`], each rule compiled once per thread: a CRD's rules are the same at every
/// write, and parsing them was a tenth of the emulator's work in a rollout.
pub(crate) fn compile_cached(rule: &str, message_expression: Option<&str>) -> Compiled {
    RULES.with(|cache| {
        let mut cache = cache.borrow_mut();
        let key = (rule.to_owned(), message_expression.map(str::to_owned));
        if let Some(compiled) = cache.get(&key) {
            return compiled.clone();
        }
        if cache.len() >= RULE_CACHE_LIMIT {
            cache.clear();
        }
        let compiled = Rc::new(compile(rule, message_expression));
        cache.insert(key, compiled.clone());
        compiled
    })
}

/// Compiles `rule` and its optional `messageExpression`; `Err` says why not.
pub(crate) fn compile(
    rule: &str,
    message_expression: Option<&str>,
) -> Result<CompiledRule, String> {
    let program = parse(rule)?;
    let message = match message_expression {
        Some(m) => Some(parse(m).map_err(|e| format!("messageExpression: {e}"))?),
        None => None,
    };
    let uses_old_self = program.references().has_variable("oldSelf");
    Ok(CompiledRule {
        program,
        message,
        uses_old_self,
    })
}

fn parse(source: &str) -> Result<Program, String> {
    match catch_unwind(|| Program::compile(source)) {
        Ok(Ok(program)) => Ok(program),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the CEL parser panicked".to_owned()),
    }
}

/// Runs `rule` with `self` bound to `this` and `oldSelf` to `old` (to an
/// optional of it when `optional_old_self`).
pub(crate) fn run(
    rule: &CompiledRule,
    this: CelValue,
    old: Option<CelValue>,
    optional_old_self: bool,
) -> CelOutcome {
    if rule.uses_old_self && old.is_none() && !optional_old_self {
        return CelOutcome::Skipped;
    }
    BASE.with(|base| {
        let mut ctx = base.new_inner_scope();
        ctx.add_variable_from_value("self", this);
        if optional_old_self {
            let optional = match old {
                Some(old) => OptionalValue::of(old),
                None => OptionalValue::none(),
            };
            ctx.add_variable_from_value("oldSelf", CelValue::Opaque(Arc::new(optional)));
        } else if let Some(old) = old {
            ctx.add_variable_from_value("oldSelf", old);
        }
        match execute(&rule.program, &ctx) {
            Ok(CelValue::Bool(true)) => CelOutcome::Pass,
            Ok(CelValue::Bool(false)) => {
                CelOutcome::Fail(rule.message.as_ref().and_then(|m| message(m, &ctx)))
            }
            Ok(other) => CelOutcome::NotBool(other.type_of().to_string()),
            Err(e) => CelOutcome::Error(e),
        }
    })
}

fn execute(program: &Program, ctx: &Context<'_>) -> Result<CelValue, String> {
    match catch_unwind(AssertUnwindSafe(|| program.execute(ctx))) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the CEL evaluator panicked".to_owned()),
    }
}

/// A `messageExpression` result the apiserver would use: a non-empty string
/// without line breaks, at most 5 KiB, trimmed.
fn message(program: &Program, ctx: &Context<'_>) -> Option<String> {
    match execute(program, ctx) {
        Ok(CelValue::String(s)) => {
            let s = s.trim();
            (!s.is_empty() && !s.contains('\n') && s.len() <= MAX_MESSAGE_LEN).then(|| s.to_owned())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(rule: &str, this: CelValue) -> CelOutcome {
        let compiled = compile(rule, None).unwrap();
        run(&compiled, this, None, false)
    }

    fn s(text: &str) -> CelValue {
        CelValue::String(Arc::new(text.to_owned()))
    }

    #[test]
    fn type_function_and_identifiers() {
        assert_eq!(
            eval("type(self) == int", CelValue::Int(1)),
            CelOutcome::Pass
        );
        assert_eq!(eval("type(self) == int", s("1")), CelOutcome::Fail(None));
        assert_eq!(eval("type(self) == string", s("1")), CelOutcome::Pass);
        assert_eq!(
            eval("type(self) != 'int'", CelValue::Int(1)),
            CelOutcome::Pass
        );
        assert_eq!(
            eval("type(type(self)) == type", CelValue::Int(1)),
            CelOutcome::Pass
        );
        assert_eq!(
            eval("type(self) == double", CelValue::Float(1.0)),
            CelOutcome::Pass
        );
        assert_eq!(
            eval("type(self) == null_type", CelValue::Null),
            CelOutcome::Pass
        );
        // The conversion functions of the same names still work.
        assert_eq!(
            eval("int(self) == 3 && string(self) == '3'", CelValue::Int(3)),
            CelOutcome::Pass
        );
        assert_eq!(eval("dyn(self) == 3", CelValue::Int(3)), CelOutcome::Pass);
    }

    #[test]
    fn the_budget_rule() {
        let rule = "type(self) == int ? self >= 1 : self.matches('^(100|[1-9][0-9]?)%$')";
        assert_eq!(eval(rule, CelValue::Int(1)), CelOutcome::Pass);
        assert_eq!(eval(rule, CelValue::Int(0)), CelOutcome::Fail(None));
        assert_eq!(eval(rule, s("100%")), CelOutcome::Pass);
        assert_eq!(eval(rule, s("0%")), CelOutcome::Fail(None));
        assert_eq!(eval(rule, s("101%")), CelOutcome::Fail(None));
        // The type()-free spelling gives the same answers.
        let rule =
            "string(self) == self ? string(self).matches('^(100|[1-9][0-9]?)%$') : int(self) >= 1";
        assert_eq!(eval(rule, CelValue::Int(1)), CelOutcome::Pass);
        assert_eq!(eval(rule, CelValue::Int(0)), CelOutcome::Fail(None));
        assert_eq!(eval(rule, s("100%")), CelOutcome::Pass);
        assert_eq!(eval(rule, s("0%")), CelOutcome::Fail(None));
    }

    #[test]
    fn kube_cel_library_is_available() {
        assert_eq!(
            eval("duration(self) >= duration('1m')", s("90s")),
            CelOutcome::Pass
        );
        assert_eq!(
            eval("self.lowerAscii() == 'abc'", s("ABC")),
            CelOutcome::Pass
        );
        assert_eq!(eval("isQuantity(self)", s("1Gi")), CelOutcome::Pass);
    }

    /// The cached `matches` answers as `cel`'s own: for the same pattern again (from the
    /// cache) on other text, unanchored, and with `cel`'s error for a bad pattern.
    #[test]
    fn matches_answers_as_cel_does_from_the_cache_too() {
        let s = |v: &str| CelValue::String(Arc::new(v.to_owned()));
        for (text, expected) in [("ab1", CelOutcome::Pass), ("ab", CelOutcome::Fail(None))] {
            for _ in 0..2 {
                assert_eq!(eval("self.matches('b[0-9]')", s(text)), expected, "{text}");
            }
        }
        let bad = eval("self.matches('[')", s("x"));
        let cel_error = kube_cel::cel::Program::compile("'x'.matches('[')")
            .unwrap()
            .execute(&kube_cel::cel::Context::default())
            .unwrap_err()
            .to_string();
        assert_eq!(bad, CelOutcome::Error(cel_error));
        // A rule compiled once per thread is the same program.
        let first = compile_cached("self > 1", None);
        assert!(Rc::ptr_eq(&first, &compile_cached("self > 1", None)));
        assert!(!Rc::ptr_eq(
            &first,
            &compile_cached("self > 1", Some("'m'"))
        ));
    }

    #[test]
    fn transition_rules_and_optional_old_self() {
        let rule = compile("self >= oldSelf", None).unwrap();
        assert_eq!(
            run(&rule, CelValue::Int(1), None, false),
            CelOutcome::Skipped
        );
        assert_eq!(
            run(&rule, CelValue::Int(1), Some(CelValue::Int(2)), false),
            CelOutcome::Fail(None)
        );
        let optional = compile("!oldSelf.hasValue() || self >= oldSelf.value()", None).unwrap();
        assert_eq!(
            run(&optional, CelValue::Int(1), None, true),
            CelOutcome::Pass
        );
        assert_eq!(
            run(&optional, CelValue::Int(1), Some(CelValue::Int(2)), true),
            CelOutcome::Fail(None)
        );
    }

    #[test]
    fn messages_errors_and_non_bools() {
        let rule = compile("self < 3", Some("'got ' + string(self)")).unwrap();
        assert_eq!(
            run(&rule, CelValue::Int(5), None, false),
            CelOutcome::Fail(Some("got 5".to_owned()))
        );
        let blank = compile("false", Some("'  '")).unwrap();
        assert_eq!(
            run(&blank, CelValue::Int(5), None, false),
            CelOutcome::Fail(None)
        );
        assert_eq!(
            eval("self + 1", CelValue::Int(1)),
            CelOutcome::NotBool("int".to_owned())
        );
        assert!(matches!(
            eval("self / 0 == 1", CelValue::Int(1)),
            CelOutcome::Error(_)
        ));
        assert!(
            matches!(eval("nosuchfn(self)", CelValue::Int(1)), CelOutcome::Error(e) if e.contains("nosuchfn"))
        );
        assert!(compile("self >>>= 1", None).is_err());
        assert!(compile("true", Some("'open")).is_err());
    }
}
