use super::*;
use proptest::prelude::*;

const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

enum Expect {
    /// Parses; renders as this canonical form; pins as this (when a digest is present).
    Good(String, Option<String>),
    Bad(ImageRefError),
}
use Expect::{Bad, Good};

fn good(rendered: impl Into<String>) -> Expect {
    Good(rendered.into(), None)
}

fn pinned(rendered: impl Into<String>, pin: impl Into<String>) -> Expect {
    Good(rendered.into(), Some(pin.into()))
}

/// Refused for the shell metacharacter `ch` at `pos`.
fn shell(ch: char, pos: usize) -> Expect {
    Bad(ImageRefError::ShellMetacharacter { ch, pos })
}

/// Refused for the character `ch`, outside the reference grammar, at `pos`.
fn invalid(ch: char, pos: usize) -> Expect {
    Bad(ImageRefError::InvalidCharacter { ch, pos })
}

/// Refused for the control character of code point `code` at `pos`.
fn control(code: u32, pos: usize) -> Expect {
    Bad(ImageRefError::ControlCharacter { pos, code })
}

fn cases() -> Vec<(String, Expect)> {
    let d = |s: &str| s.replace("{HEX}", HEX);
    let upper_hex = HEX.to_uppercase();
    let long_tag = "t".repeat(128);
    let too_long_tag = "t".repeat(129);
    let long_name = format!("quay.io/{}", "a".repeat(250));
    vec![
        // Good: normalisation and canonical rendering.
        (
            d("quay.io/fedora/fedora-bootc:42"),
            good("quay.io/fedora/fedora-bootc:42"),
        ),
        (d("ubuntu"), good("docker.io/library/ubuntu:latest")),
        (d("ubuntu:24.04"), good("docker.io/library/ubuntu:24.04")),
        (d("library/ubuntu"), good("docker.io/library/ubuntu:latest")),
        (
            d("docker.io/ubuntu"),
            good("docker.io/library/ubuntu:latest"),
        ),
        (
            d("index.docker.io/library/ubuntu:22.04"),
            good("docker.io/library/ubuntu:22.04"),
        ),
        (
            d("index.docker.io/busybox"),
            good("docker.io/library/busybox:latest"),
        ),
        (d("myorg/myimage:v1"), good("docker.io/myorg/myimage:v1")),
        (d("localhost/foo"), good("localhost/foo:latest")),
        (
            d("localhost:5000/foo/bar:dev"),
            good("localhost:5000/foo/bar:dev"),
        ),
        (
            d("127.0.0.1:5000/os/base:stable"),
            good("127.0.0.1:5000/os/base:stable"),
        ),
        (
            d("[::1]:5000/os/base:stable"),
            good("[::1]:5000/os/base:stable"),
        ),
        (d("[fe80::1]/os"), good("[fe80::1]/os:latest")),
        (
            d("registry.example.com/a/b/c/d/e:tag"),
            good("registry.example.com/a/b/c/d/e:tag"),
        ),
        (d("example.com:443/x"), good("example.com:443/x:latest")),
        (
            d("Registry.Example.COM/ns/img"),
            good("Registry.Example.COM/ns/img:latest"),
        ),
        (
            d("ghcr.io/org/repo_name.with-seps__x:1.0.0-rc.1"),
            good("ghcr.io/org/repo_name.with-seps__x:1.0.0-rc.1"),
        ),
        (
            d("registry-1.example.com/a--b/c"),
            good("registry-1.example.com/a--b/c:latest"),
        ),
        (d("quay.io/x:_under"), good("quay.io/x:_under")),
        (
            format!("quay.io/x:{long_tag}"),
            good(format!("quay.io/x:{long_tag}")),
        ),
        (
            d("quay.io/centos-bootc/centos-bootc@sha256:{HEX}"),
            pinned(
                d("quay.io/centos-bootc/centos-bootc@sha256:{HEX}"),
                d("quay.io/centos-bootc/centos-bootc@sha256:{HEX}"),
            ),
        ),
        (
            d("quay.io/x/y:stable@sha256:{HEX}"),
            pinned(
                d("quay.io/x/y:stable@sha256:{HEX}"),
                d("quay.io/x/y@sha256:{HEX}"),
            ),
        ),
        (
            d("busybox@sha256:{HEX}"),
            pinned(
                d("docker.io/library/busybox@sha256:{HEX}"),
                d("docker.io/library/busybox@sha256:{HEX}"),
            ),
        ),
        (
            d("127.0.0.1:5000/os:v2@sha256:{HEX}"),
            pinned(
                d("127.0.0.1:5000/os:v2@sha256:{HEX}"),
                d("127.0.0.1:5000/os@sha256:{HEX}"),
            ),
        ),
        // Bad: option injection, whitespace, control and shell characters.
        (d(""), Bad(ImageRefError::Empty)),
        (d("--apply"), Bad(ImageRefError::LeadingDash)),
        (d("-quay.io/x"), Bad(ImageRefError::LeadingDash)),
        (d("quay.io/x y"), Bad(ImageRefError::Whitespace { pos: 9 })),
        (d(" quay.io/x"), Bad(ImageRefError::Whitespace { pos: 0 })),
        (d("quay.io/x\n"), Bad(ImageRefError::Whitespace { pos: 9 })),
        (d("quay.io/x\tv"), Bad(ImageRefError::Whitespace { pos: 9 })),
        (d("quay.io/x\u{1b}[0m"), control(0x1b, 9)),
        (d("quay.io/x\0"), control(0, 9)),
        (d("x; reboot"), shell(';', 1)),
        (d("quay.io/x$(id)"), shell('$', 9)),
        (d("quay.io/x`id`"), shell('`', 9)),
        (d("quay.io/x|sh"), shell('|', 9)),
        (d("quay.io/x&&y"), shell('&', 9)),
        (d("quay.io/x>out"), shell('>', 9)),
        (d("quay.io/x*"), shell('*', 9)),
        (d("quay.io/é"), invalid('é', 8)),
        (d("quay.io/x\u{200b}"), invalid('\u{200b}', 9)),
        (d("quay.io/x+y"), invalid('+', 9)),
        // Bad: repository.
        (
            d("quay.io/Fedora/bootc"),
            Bad(ImageRefError::UppercaseRepository {
                repository: "Fedora/bootc".into(),
            }),
        ),
        (
            d("Ubuntu"),
            Bad(ImageRefError::UppercaseRepository {
                repository: "Ubuntu".into(),
            }),
        ),
        (d("quay.io/"), Bad(ImageRefError::EmptyRepository)),
        (d(":tag"), Bad(ImageRefError::EmptyRepository)),
        (d("@sha256:{HEX}"), Bad(ImageRefError::EmptyRepository)),
        (
            d("quay.io//x"),
            Bad(ImageRefError::EmptyPathComponent {
                repository: "/x".into(),
            }),
        ),
        (
            d("quay.io/x/"),
            Bad(ImageRefError::EmptyPathComponent {
                repository: "x/".into(),
            }),
        ),
        (
            d("quay.io/x..y"),
            Bad(ImageRefError::InvalidPathComponent {
                component: "x..y".into(),
            }),
        ),
        (
            d("quay.io/_x"),
            Bad(ImageRefError::InvalidPathComponent {
                component: "_x".into(),
            }),
        ),
        (
            d("quay.io/x___y"),
            Bad(ImageRefError::InvalidPathComponent {
                component: "x___y".into(),
            }),
        ),
        (
            d("quay.io/x-"),
            Bad(ImageRefError::InvalidPathComponent {
                component: "x-".into(),
            }),
        ),
        (
            d("quay.io/x:tag:more"),
            Bad(ImageRefError::InvalidPathComponent {
                component: "x:tag".into(),
            }),
        ),
        // Bad: tag.
        (d("quay.io/x:"), Bad(ImageRefError::EmptyTag)),
        (
            d("quay.io/x:-bad"),
            Bad(ImageRefError::InvalidTag { tag: "-bad".into() }),
        ),
        (
            d("quay.io/x:.bad"),
            Bad(ImageRefError::InvalidTag { tag: ".bad".into() }),
        ),
        (
            format!("quay.io/x:{too_long_tag}"),
            Bad(ImageRefError::InvalidTag {
                tag: too_long_tag.clone(),
            }),
        ),
        // Bad: digest.
        (d("quay.io/x@"), Bad(ImageRefError::EmptyDigest)),
        (d("quay.io/x@sha256:"), Bad(ImageRefError::EmptyDigest)),
        (
            d("quay.io/x@sha256:abc"),
            Bad(ImageRefError::DigestLength { len: 3 }),
        ),
        (
            format!("quay.io/x@sha256:{}", &HEX[..63]),
            Bad(ImageRefError::DigestLength { len: 63 }),
        ),
        (
            format!("quay.io/x@sha256:{HEX}0"),
            Bad(ImageRefError::DigestLength { len: 65 }),
        ),
        (
            format!("quay.io/x@sha256:{}g", &HEX[..63]),
            Bad(ImageRefError::DigestNotHex { ch: 'g' }),
        ),
        (
            format!("quay.io/x@sha256:{upper_hex}"),
            Bad(ImageRefError::DigestNotHex { ch: 'A' }),
        ),
        (
            format!("quay.io/x@sha512:{HEX}{HEX}"),
            Bad(ImageRefError::UnsupportedDigestAlgorithm {
                algorithm: "sha512".into(),
            }),
        ),
        (
            d("quay.io/x@md5:abc"),
            Bad(ImageRefError::UnsupportedDigestAlgorithm {
                algorithm: "md5".into(),
            }),
        ),
        (
            d("quay.io/x@{HEX}"),
            Bad(ImageRefError::MalformedDigest { digest: HEX.into() }),
        ),
        (
            d("quay.io/x@sha256:{HEX}@sha256:{HEX}"),
            Bad(ImageRefError::MultipleDigests),
        ),
        // Bad: registry and port.
        (
            d("quay.io:99999/x"),
            Bad(ImageRefError::InvalidPort {
                port: "99999".into(),
            }),
        ),
        (
            d("quay.io:0/x"),
            Bad(ImageRefError::InvalidPort { port: "0".into() }),
        ),
        (
            d("quay.io:/x"),
            Bad(ImageRefError::InvalidPort { port: "".into() }),
        ),
        (
            d("quay.io:abc/x"),
            Bad(ImageRefError::InvalidPort { port: "abc".into() }),
        ),
        (
            d("bad-.example.com/x"),
            Bad(ImageRefError::InvalidRegistry {
                registry: "bad-.example.com".into(),
            }),
        ),
        (
            d("quay..io/x"),
            Bad(ImageRefError::InvalidRegistry {
                registry: "quay..io".into(),
            }),
        ),
        (
            d("[::1/x"),
            Bad(ImageRefError::InvalidRegistry {
                registry: "[::1".into(),
            }),
        ),
        (
            d("[]:5000/x"),
            Bad(ImageRefError::InvalidRegistry {
                registry: "[]:5000".into(),
            }),
        ),
        // Bad: length.
        (
            "a".repeat(600),
            Bad(ImageRefError::TooLong {
                what: "the reference",
                len: 600,
                max: REF_MAX_LEN,
            }),
        ),
        (
            long_name,
            Bad(ImageRefError::TooLong {
                what: "the name (registry/repository)",
                len: 258,
                max: NAME_MAX_LEN,
            }),
        ),
    ]
}

#[test]
fn table() {
    let cases = cases();
    assert!(cases.len() >= 40, "only {} cases", cases.len());
    for (input, expect) in cases {
        let got = ImageRef::parse(&input);
        match (expect, got) {
            (Good(rendered, pin), Ok(r)) => {
                assert_eq!(r.to_string(), rendered, "rendering of {input:?}");
                assert_eq!(r.pinned(), pin, "pin of {input:?}");
                assert_eq!(ImageRef::parse(&rendered), Ok(r), "re-parse of {input:?}");
            }
            (Bad(want), Err(got)) => assert_eq!(got, want, "error for {input:?}"),
            (Good(..), Err(e)) => panic!("{input:?} should parse, got: {e}"),
            (Bad(want), Ok(r)) => panic!("{input:?} should fail with {want:?}, parsed as {r}"),
        }
    }
}

/// The CRD pattern and the parser agree: everything the parser takes, the pattern takes;
/// the pattern refuses every bad case except those only a program can check (length,
/// port range), which `validate()` catches through the parser.
#[test]
fn schema_pattern_agrees_with_parser() {
    let pattern = regex::Regex::new(IMAGE_REF_PATTERN).unwrap();
    for (input, expect) in cases() {
        match expect {
            Good(..) => assert!(pattern.is_match(&input), "pattern refuses good {input:?}"),
            Bad(ImageRefError::TooLong { .. }) => {}
            Bad(ImageRefError::InvalidPort { port })
                if port.chars().all(|c| c.is_ascii_digit()) && !port.is_empty() => {}
            Bad(err) => assert!(
                !pattern.is_match(&input),
                "pattern accepts bad {input:?} ({err})"
            ),
        }
    }
}

#[test]
fn pin_pattern_matches_only_pins() {
    let pattern = regex::Regex::new(IMAGE_PIN_PATTERN).unwrap();
    let pin = ImageRef::parse(&format!("quay.io/x/y:tag@sha256:{HEX}"))
        .unwrap()
        .pinned()
        .unwrap();
    assert!(pattern.is_match(&pin));
    assert!(ImageRef::parse(&pin).unwrap().is_pin());
    for not_pin in [
        format!("quay.io/x/y:tag@sha256:{HEX}"),
        "quay.io/x/y:tag".to_string(),
        format!("x@sha256:{HEX}"),
    ] {
        assert!(!pattern.is_match(&not_pin), "{not_pin}");
    }
}

#[test]
fn messages_say_what_is_wrong() {
    let msg = |s: &str| ImageRef::parse(s).unwrap_err().to_string();
    assert_eq!(
        msg("--apply"),
        "it starts with '-' and would be read as a command-line option"
    );
    assert_eq!(
        msg("x; reboot"),
        "it contains shell metacharacter ';' at position 1"
    );
    assert_eq!(msg("quay.io/Foo"), "repository \"Foo\" must be lowercase");
    assert_eq!(
        msg("x@sha256:abc"),
        "the sha256 digest has 3 hex characters instead of 64"
    );
    assert_eq!(
        msg("x@sha1:abc"),
        "digest algorithm \"sha1\" is not supported (only sha256)"
    );
    assert_eq!(
        msg("a\u{7}"),
        "it contains control character U+0007 at position 1"
    );
}

#[test]
fn digest_parses_and_shortens() {
    let d: Digest = format!("sha256:{HEX}").parse().unwrap();
    assert_eq!(d.hex(), HEX);
    assert_eq!(d.short(), "0123456789ab");
    assert_eq!(d.to_string(), format!("sha256:{HEX}"));
    assert_eq!(d.as_str(), format!("sha256:{HEX}"));
    assert!("sha256:xyz".parse::<Digest>().is_err());
    let r = ImageRef::parse("quay.io/a/b:1").unwrap();
    assert_eq!(r.pin(&d), format!("quay.io/a/b@sha256:{HEX}"));
    assert_eq!(r.name(), "quay.io/a/b");
    assert_eq!(
        (r.registry(), r.repository(), r.tag()),
        ("quay.io", "a/b", Some("1"))
    );
    assert!(r.digest().is_none() && !r.is_pin());
}

fn reference_strategy() -> impl Strategy<Value = String> {
    let registry = prop_oneof![
        Just(String::new()),
        Just("docker.io/".to_string()),
        Just("index.docker.io/".to_string()),
        Just("localhost/".to_string()),
        "[a-z][a-z0-9-]{0,6}[a-z0-9]\\.[a-z]{2,4}(:[1-9][0-9]{0,3})?/",
        "127\\.0\\.0\\.1:[1-9][0-9]{0,3}/",
        "\\[::[1-9a-f]\\](:[1-9][0-9]{0,3})?/",
    ];
    // Without a registry, a first component holding '.' would be read as a registry (as
    // docker reads it), so the first component never has one.
    let first = "[a-z0-9]{1,6}((_|__|-{1,2})[a-z0-9]{1,6}){0,2}";
    let component = "[a-z0-9]{1,6}(([._]|__|-{1,2})[a-z0-9]{1,6}){0,2}";
    let repository =
        (first, proptest::collection::vec(component, 0..3)).prop_map(|(first, rest)| {
            std::iter::once(first)
                .chain(rest)
                .collect::<Vec<_>>()
                .join("/")
        });
    let tag = proptest::option::of("[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}");
    let digest = proptest::option::of("[a-f0-9]{64}");
    (registry, repository, tag, digest).prop_map(|(reg, repo, tag, digest)| {
        let mut s = format!("{reg}{repo}");
        if let Some(t) = tag {
            s.push(':');
            s.push_str(&t);
        }
        if let Some(d) = digest {
            s.push_str("@sha256:");
            s.push_str(&d);
        }
        s
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Whatever parses re-renders to a string that parses to the same value, and the
    /// rendering is a fixed point.
    #[test]
    fn round_trip(s in reference_strategy()) {
        let parsed = ImageRef::parse(&s).map_err(|e| TestCaseError::fail(format!("{s:?}: {e}")))?;
        let rendered = parsed.to_string();
        let reparsed = ImageRef::parse(&rendered).map_err(|e| TestCaseError::fail(format!("{rendered:?}: {e}")))?;
        prop_assert_eq!(&reparsed, &parsed);
        prop_assert_eq!(reparsed.to_string(), rendered);
        if let Some(pin) = parsed.pinned() {
            let pin_ref = ImageRef::parse(&pin).map_err(|e| TestCaseError::fail(format!("{pin:?}: {e}")))?;
            prop_assert!(pin_ref.is_pin());
            prop_assert_eq!(pin_ref.digest(), parsed.digest());
        }
    }

    /// Arbitrary input never panics; anything accepted is safe on a command line and
    /// round-trips.
    #[test]
    fn arbitrary_input(s in "\\PC{0,40}|[a-z0-9./:@_-]{0,40}|[ -~]{0,40}") {
        if let Ok(parsed) = ImageRef::parse(&s) {
            prop_assert!(!s.starts_with('-'));
            prop_assert!(!s.chars().any(|c| c.is_whitespace() || c.is_control() || SHELL_METACHARACTERS.contains(&c)));
            let rendered = parsed.to_string();
            prop_assert_eq!(ImageRef::parse(&rendered), Ok(parsed));
            prop_assert!(regex::Regex::new(IMAGE_REF_PATTERN).unwrap().is_match(&rendered));
        }
    }
}

#[test]
fn the_matching_rule_takes_the_per_arch_digest_or_the_digest_in_the_reference() {
    let a = format!("sha256:{}", "a".repeat(64));
    let b = format!("sha256:{}", "b".repeat(64));
    let target: Digest = a.parse().unwrap();
    // The per-architecture digest.
    assert!(runs_digest("quay.io/x/os:stable", &a, &target));
    // A manifest list: the reference carries the index digest, the per-arch one differs.
    assert!(runs_digest(&format!("quay.io/x/os@{a}"), &b, &target));
    // Neither.
    assert!(!runs_digest(&format!("quay.io/x/os@{b}"), &b, &target));
    assert!(!runs_digest("quay.io/x/os:stable", "", &target));
    // A reference the grammar refuses still gives the digest after its last `@`.
    assert_eq!(digest_in(&format!("oci:/var/x@{a}")), Some(target.clone()));
    assert_eq!(digest_in("quay.io/x/os:stable"), None);
    assert_eq!(digest_in("nonsense@sha256:short"), None);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// The digest in a reference is the one the grammar parses out of it, for every
    /// reference the grammar accepts.
    #[test]
    fn the_digest_in_a_reference_is_the_parsed_ones(s in reference_strategy()) {
        let parsed = ImageRef::parse(&s).map_err(|e| TestCaseError::fail(format!("{s:?}: {e}")))?;
        prop_assert_eq!(digest_in(&s), parsed.digest().cloned());
    }

    /// `is_digest` and `digest_text_in` answer as parsing does.
    #[test]
    fn the_digest_checks_answer_as_parsing_does(
        s in "sha256:[a-fA-F0-9:]{60,66}|sha[0-9]{3}:[a-f0-9]{64}|[ -~]{0,80}",
        name in reference_strategy(),
    ) {
        prop_assert_eq!(is_digest(&s), s.parse::<Digest>().is_ok(), "{}", s);
        let reference = format!("{name}@{s}");
        prop_assert_eq!(
            digest_text_in(&reference).map(str::to_owned),
            digest_in(&reference).map(|d| d.to_string()),
            "{}", reference
        );
    }

    /// Finding the digest in a reference and matching a host against a target read the
    /// text after the reference's last `@`, as splitting there does, for references of
    /// any shape: several `@`, none, one at the end, digests cut short or too long, text
    /// beyond ASCII.
    #[test]
    fn the_digest_after_the_last_at_is_read_as_splitting_there_reads_it(
        parts in proptest::collection::vec(
            "@|sha256:[a-f0-9]{64}|sha256:[a-f0-9]{62,66}|sha512:[a-f0-9]{64}|[a-zé/:.]{0,12}|[ -~]{0,8}",
            0..5,
        ),
        hex in "[a-f0-9]{64}",
        per_arch in "|sha256:[a-f0-9]{64}",
    ) {
        let reference = parts.concat();
        let split = reference.rsplit_once('@').map(|(_, d)| d);
        prop_assert_eq!(
            digest_text_in(&reference),
            split.filter(|d| d.parse::<Digest>().is_ok()),
            "{}", reference
        );
        let target: Digest = format!("sha256:{hex}").parse().unwrap();
        for t in [target, split.and_then(|d| d.parse::<Digest>().ok()).unwrap_or_else(|| format!("sha256:{hex}").parse().unwrap())] {
            let plain = per_arch == t.to_string() || split == Some(t.to_string().as_str());
            prop_assert_eq!(runs_digest(&reference, &per_arch, &t), plain, "{} {}", reference, t);
        }
    }

    /// `Digest::is` answers as parsing and comparing does, for digests written out, near
    /// misses (another digest, upper case, cut short, another algorithm) and noise.
    #[test]
    fn is_answers_as_parsing_and_comparing(
        hex in "[a-f0-9]{64}",
        other in "sha256:[a-fA-F0-9]{60,66}|sha512:[a-f0-9]{64}|[ -~]{0,80}",
    ) {
        let digest: Digest = format!("sha256:{hex}").parse().unwrap();
        for s in [format!("sha256:{hex}"), format!("sha256:{}", hex.to_uppercase()), other] {
            prop_assert_eq!(digest.is(&s), s.parse::<Digest>() == Ok(digest.clone()), "{}", s);
        }
    }
}
