//! The `bootc` command line, as a thin layer over [`State`] and a [`ImageResolver`].
//!
//! Exit codes: 0 on success (and for `--help`/`--version`), 1 with `error: <message>` on
//! stderr when a command fails (as bootc), 2 with clap's message for a usage error
//! (unknown flag, missing argument), as bootc (which uses clap) does.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Arg, ArgAction, ArgMatches, Command};

use crate::faults::Faults;
use crate::policy::Policy;
use crate::progress::{Reporter, Reporting};
use crate::reference::{Reference, check_safe};
use crate::resolver::{HttpResolver, ImageInfo, ImageResolver};
use crate::state::{self, Outcome, State};
use crate::version::{VERSION_ENV, Version};
use crate::{Error, seed};

/// The version `bootc --version` prints (after `bootc `) in the default mode (1.16.9).
pub const VERSION: &str = "1.16.9-standin";
/// The default state directory.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/bootc-standin";
/// Environment variable overriding the state directory.
pub const STATE_DIR_ENV: &str = "BOOTC_STANDIN_STATE_DIR";
/// Environment variable overriding the root under which auth files and `/ostree/bootc`
/// are found (default `/`).
pub const ROOT_ENV: &str = "BOOTC_STANDIN_ROOT";
/// Environment variable that, set to `1`, skips the container check (for tests).
pub const ALLOW_CONTAINER_ENV: &str = "BOOTC_STANDIN_ALLOW_CONTAINER";

/// What the command line depends on besides its arguments.
#[derive(Debug, Clone)]
pub struct Env {
    /// Where the deployments and `faults.json` are kept.
    pub state_dir: PathBuf,
    /// The root under which `run/ostree/auth.json` etc., `run/.containerenv` and
    /// `ostree/bootc` are found.
    pub root: PathBuf,
    /// Skip the container check.
    pub allow_container: bool,
    /// The value of the `container` environment variable, if set.
    pub container_var: Option<String>,
    /// The effective uid (`None`: unknown, treated as not root).
    pub uid: Option<u32>,
    /// `BOOTC_STANDIN_VERSION`, if set: the bootc to play ([`Version::choose`]).
    pub version: Option<String>,
}

/// The effective uid, from the `Uid:` line of `/proc/self/status`.
pub fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

impl Env {
    /// The environment of this process.
    pub fn from_process() -> Env {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        Env {
            state_dir: var(STATE_DIR_ENV)
                .map_or_else(|| PathBuf::from(DEFAULT_STATE_DIR), PathBuf::from),
            root: var(ROOT_ENV).map_or_else(|| PathBuf::from("/"), PathBuf::from),
            allow_container: var(ALLOW_CONTAINER_ENV).is_some_and(|v| v == "1"),
            container_var: var("container").map(|v| v.to_string_lossy().into_owned()),
            uid: effective_uid(),
            version: var(VERSION_ENV).map(|v| v.to_string_lossy().into_owned()),
        }
    }

    fn check_privileges(&self) -> Result<(), Error> {
        if self.uid != Some(0) {
            return Err(Error::NotRoot);
        }
        if !self.allow_container {
            if let Some(c) = &self.container_var {
                return Err(Error::InContainer(format!("container={c}")));
            }
            if self.root.join("run/.containerenv").exists() {
                return Err(Error::InContainer("/run/.containerenv".to_owned()));
            }
        }
        Ok(())
    }
}

fn flag(name: &'static str, help: &'static str) -> Arg {
    Arg::new(name)
        .long(name)
        .action(ArgAction::SetTrue)
        .help(help)
}

/// `--progress-fd`, hidden as in bootc.
fn progress_fd() -> Arg {
    Arg::new("progress-fd")
        .long("progress-fd")
        .value_name("PROGRESS_FD")
        .hide(true)
        .value_parser(crate::progress::parse_fd)
        .help("Write progress reports as JSON lines to this file descriptor (a pipe, above 2)")
}

fn soft_reboot() -> Arg {
    Arg::new("soft-reboot")
        .long("soft-reboot")
        .value_name("SOFT_REBOOT")
        .value_parser(["required", "auto"])
        .help("Configure soft reboot behavior (only with --apply; the stand-in never reboots)")
}

/// The clap command of `version`; `switch_download_only` is false for a bootc older
/// than `switch --download-only` (1.16.9, or the `switchHelpWithoutDownloadOnly` fault).
pub fn command(version: Version, switch_download_only: bool) -> Command {
    Command::new("bootc")
        .version(version.shown())
        .about("Deploy and transactionally in-place with bootable container images (stand-in for tests)")
        .subcommand_required(true)
        .arg_required_else_help(true)
        .subcommand(upgrade_command())
        .subcommand(switch_command(switch_download_only))
        .subcommand(rollback_command())
        .subcommand(status_command())
        .subcommand(
            Command::new("internal-finalize-boot")
                .hide(true)
                .about("Apply an unlocked staged deployment or a queued rollback, discard a locked one (run at boot)"),
        )
        .subcommand(
            Command::new("internal-seed")
                .hide(true)
                .about("Pull IMAGE and make it the booted deployment, replacing any state")
                .arg(Arg::new("image").value_name("IMAGE").required(true)),
        )
}

fn switch_command(download_only: bool) -> Command {
    let switch = Command::new("switch")
        .about("Target a new container image reference to boot")
        .arg(flag("quiet", "Don't display progress"))
        .arg(flag("apply", "Restart or reboot into the new target image (the stand-in does not reboot)"))
        .arg(soft_reboot())
        .arg(
            Arg::new("transport")
                .long("transport")
                .value_name("TRANSPORT")
                .default_value("registry")
                .help("The transport; e.g. oci, oci-archive, containers-storage.  Defaults to `registry`"),
        )
        .arg(flag(
            "enforce-container-sigpolicy",
            "Enforce that `containers-policy.json` (here /etc/containers/policy.json) admits the image and does not accept anything by default",
        ))
        .arg(flag("retain", "Retain reference to currently booted image"))
        .arg(progress_fd());
    let target = Arg::new("target")
        .value_name("TARGET")
        .help("Target image to use for the next boot");
    if !download_only {
        return switch.arg(target.required(true));
    }
    // bootc >= 1.16.10: the target is optional with `--from-downloaded` (the stand-in
    // refuses both together, as a usage error).
    switch
        .arg(flag(
            "download-only",
            "Download and stage the image without applying it: the staged deployment is locked until `bootc switch --from-downloaded` (or `bootc upgrade --from-downloaded`)",
        ))
        .arg(
            flag(
                "from-downloaded",
                "Apply a staged deployment that was previously downloaded with --download-only, without fetching anything",
            )
            .conflicts_with_all(["download-only", "target", "enforce-container-sigpolicy", "retain"]),
        )
        .arg(target.required_unless_present("from-downloaded"))
}

fn upgrade_command() -> Command {
    Command::new("upgrade")
        .about("Download and queue an updated container image to apply")
        .arg(flag("quiet", "Don't display progress"))
        .arg(progress_fd())
        .arg(
            flag(
                "check",
                "Check if an update is available without applying it",
            )
            .conflicts_with("apply"),
        )
        .arg(flag(
            "apply",
            "Restart or reboot into the new target image (the stand-in does not reboot)",
        ))
        .arg(soft_reboot())
        .arg(
            flag(
                "download-only",
                "Download and stage the update without applying it (locked)",
            )
            .conflicts_with_all(["apply", "check"]),
        )
        .arg(
            flag(
                "from-downloaded",
                "Unlock a staged deployment that was downloaded with --download-only",
            )
            .conflicts_with_all(["download-only", "check"]),
        )
}

fn status_command() -> Command {
    Command::new("status")
        .about("Display status")
        .arg(
            Arg::new("format")
                .long("format")
                .value_name("FORMAT")
                .value_parser(["humanreadable", "yaml", "json"])
                .help("The output format"),
        )
        .arg(
            Arg::new("format-version")
                .long("format-version")
                .value_name("FORMAT_VERSION")
                .value_parser(["0", "1"])
                .help("The desired format version (0 and 1 print the same)"),
        )
        .arg(flag("json", "Output in JSON format").hide(true))
        .arg(flag(
            "booted",
            "Only display status for the booted deployment (accepted, ignored)",
        ))
        .arg(flag(
            "verbose",
            "Include additional fields (accepted, ignored)",
        ))
}

fn rollback_command() -> Command {
    Command::new("rollback")
        .about("Change the bootloader entry ordering; the deployment under `rollback` will be queued for the next boot")
        .arg(flag("apply", "Restart or reboot into the rollback image (the stand-in does not reboot)"))
        .arg(soft_reboot())
}

/// Runs the command line with `args` (without the program name) against `env`, pulling
/// through `resolver`; returns the exit code.
pub fn main_with(
    args: &[String],
    env: &Env,
    resolver: &dyn ImageResolver,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let loaded = Faults::load(&env.state_dir).and_then(|faults| {
        Version::choose(env.version.as_deref(), &env.state_dir).map(|v| (faults, v))
    });
    let (faults, version) = match loaded {
        Ok(loaded) => loaded,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return 1;
        }
    };
    let argv = std::iter::once("bootc".to_owned()).chain(args.iter().cloned());
    let switch_download_only =
        version.switch_download_only() && !faults.switch_help_without_download_only;
    let matches = match command(version, switch_download_only).try_get_matches_from(argv) {
        Ok(m) => m,
        Err(e) => {
            let text = e.render().to_string();
            let sink: &mut dyn Write = if e.use_stderr() { err } else { out };
            let _ = write!(sink, "{text}");
            return e.exit_code();
        }
    };
    let Some((sub, sub_matches)) = matches.subcommand() else {
        let _ = writeln!(err, "error: no subcommand");
        return 2;
    };
    if let Err(e) = crate::calls::record(&env.state_dir, sub) {
        let _ = writeln!(err, "error: {e}");
        return 1;
    }
    if let Some(message) = faults.failure(sub, args) {
        let _ = writeln!(err, "error: {message}");
        return 1;
    }
    if faults.hangs(sub, args) {
        let _ = out.flush();
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    match run(sub, sub_matches, env, resolver, out) {
        Ok(()) => 0,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            1
        }
    }
}

/// Runs the command line of this process (`std::env::args`, [`Env::from_process`], the
/// HTTP resolver); returns the exit code.
pub fn main_from_process() -> i32 {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let env = Env::from_process();
    let resolver = HttpResolver::new(&env.root);
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    main_with(
        &args,
        &env,
        &resolver,
        &mut stdout.lock(),
        &mut stderr.lock(),
    )
}

fn io(e: std::io::Error) -> Error {
    Error::Io {
        what: "writing output".to_owned(),
        source: e,
    }
}

fn describe(info: &ImageInfo) -> String {
    let mut s = format!("  Digest: {}", info.digest);
    if let Some(v) = &info.version {
        s.push_str(&format!("\n  Version: {v}"));
    }
    s
}

/// Loads, changes and (when changed) saves the state under the lock, then touches the
/// marker.
fn mutate(
    env: &Env,
    change: impl FnOnce(&mut State) -> Result<Outcome, Error>,
) -> Result<Outcome, Error> {
    let _lock = state::lock(&env.state_dir)?;
    let mut st = State::load(&env.state_dir)?;
    let outcome = change(&mut st)?;
    if outcome.changed() {
        st.save(&env.state_dir)?;
        state::touch_marker(&env.root)?;
    }
    Ok(outcome)
}

/// A flag's value (false when the subcommand has no such flag).
fn get_flag(m: &ArgMatches, name: &str) -> bool {
    m.try_get_one::<bool>(name)
        .ok()
        .flatten()
        .copied()
        .unwrap_or(false)
}

fn run(
    sub: &str,
    m: &ArgMatches,
    env: &Env,
    resolver: &dyn ImageResolver,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let outcome = match sub {
        "status" => return status(m, env, out),
        "switch" | "upgrade" => {
            let fd = m.get_one::<u32>("progress-fd").copied();
            let reporting = Reporting::new(resolver, Reporter::open(fd)?);
            let outcome = if sub == "switch" {
                switch(m, env, &reporting)?
            } else {
                match upgrade(m, env, &reporting, out)? {
                    Some(outcome) => outcome,
                    None => return Ok(()),
                }
            };
            reporting.finish();
            outcome
        }
        "rollback" => {
            env.check_privileges()?;
            mutate(env, State::rollback)?
        }
        "internal-finalize-boot" => match finalize_boot(env)? {
            Some(outcome) => outcome,
            None => return Ok(()),
        },
        "internal-seed" => return internal_seed(m, env, resolver, out),
        other => return Err(Error::Other(format!("unknown subcommand {other}"))),
    };
    if !get_flag(m, "quiet") {
        writeln!(out, "{outcome}").map_err(io)?;
    }
    if get_flag(m, "apply") {
        writeln!(
            out,
            "--apply: the bootc stand-in does not reboot; reboot the host to boot the new deployment"
        )
        .map_err(io)?;
    }
    Ok(())
}

/// `bootc status`: JSON for `--json`, `--format=json` and `--format=yaml`, else the
/// human-readable summary.
fn status(m: &ArgMatches, env: &Env, out: &mut dyn Write) -> Result<(), Error> {
    let st = State::load_optional(&env.state_dir)?.unwrap_or_default();
    let format = m.get_one::<String>("format").map(String::as_str);
    let json = get_flag(m, "json") || matches!(format, Some("json" | "yaml"));
    if json {
        // YAML is a superset of JSON: `--format=yaml` prints JSON too.
        let text = serde_json::to_string_pretty(&st.status())
            .map_err(|e| Error::Other(format!("serialising status: {e}")))?;
        writeln!(out, "{text}").map_err(io)?;
    } else {
        write!(out, "{}", st.summary()).map_err(io)?;
    }
    Ok(())
}

/// `bootc switch [--download-only] TARGET` (registry transport only), or `bootc switch
/// --from-downloaded` (bootc >= 1.16.10), which unlocks the staged deployment as
/// `upgrade --from-downloaded` does.
fn switch(m: &ArgMatches, env: &Env, resolver: &dyn ImageResolver) -> Result<Outcome, Error> {
    env.check_privileges()?;
    if get_flag(m, "from-downloaded") {
        return mutate(env, State::from_downloaded);
    }
    let target = m.get_one::<String>("target").cloned().unwrap_or_default();
    check_safe(&target)?;
    let transport = m
        .get_one::<String>("transport")
        .map_or("registry", String::as_str);
    if transport != "registry" {
        return Err(Error::UnsupportedTransport(transport.to_owned()));
    }
    let download_only = get_flag(m, "download-only");
    // bootc's words, for the policy's refusals as for its own.
    let in_bootcs_words = |e: Error| match e {
        Error::SignaturePolicy(words) => Error::SignaturePolicy(format!(
            "Switching: Switching (ostree): Preparing import: Fetching manifest: {words}"
        )),
        other => other,
    };
    let policy = if get_flag(m, "enforce-container-sigpolicy") {
        Some(Policy::load(&env.root).map_err(in_bootcs_words)?)
    } else {
        None
    };
    mutate(env, |st| {
        st.switch_checked(resolver, &target, download_only, policy.as_ref())
            .map_err(in_bootcs_words)
    })
}

/// `bootc upgrade [--check | --download-only | --from-downloaded]`; `None` for
/// `--check`, which prints its answer and changes nothing.
fn upgrade(
    m: &ArgMatches,
    env: &Env,
    resolver: &dyn ImageResolver,
    out: &mut dyn Write,
) -> Result<Option<Outcome>, Error> {
    env.check_privileges()?;
    if get_flag(m, "check") {
        let st = State::load(&env.state_dir)?;
        match st.check_with(resolver)? {
            Some(info) => writeln!(
                out,
                "Update available for: {}\n{}",
                info.image,
                describe(&info)
            ),
            None => writeln!(
                out,
                "No changes in: {}",
                st.spec_image().unwrap_or_default()
            ),
        }
        .map_err(io)?;
        return Ok(None);
    }
    let outcome = if get_flag(m, "from-downloaded") {
        mutate(env, State::from_downloaded)?
    } else {
        let download_only = get_flag(m, "download-only");
        mutate(env, |st| {
            // The tracked image was switched to under the host's policy: so is it
            // pulled again.
            let policy = if st.spec_container_policy() {
                Some(Policy::load(&env.root)?)
            } else {
                None
            };
            st.upgrade_checked(resolver, download_only, policy.as_ref())
        })?
    };
    Ok(Some(outcome))
}

/// `bootc internal-finalize-boot`; `None` on a host that was never seeded.
fn finalize_boot(env: &Env) -> Result<Option<Outcome>, Error> {
    env.check_privileges()?;
    let _lock = state::lock(&env.state_dir)?;
    let Some(mut st) = State::load_optional(&env.state_dir)? else {
        return Ok(None);
    };
    let outcome = st.finalize_boot();
    if outcome.changed() {
        st.save(&env.state_dir)?;
        state::touch_marker(&env.root)?;
    }
    Ok(Some(outcome))
}

/// `bootc internal-seed IMAGE`.
fn internal_seed(
    m: &ArgMatches,
    env: &Env,
    resolver: &dyn ImageResolver,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let image = m.get_one::<String>("image").cloned().unwrap_or_default();
    Reference::parse(&image)?;
    let info = resolver.resolve(&image)?;
    seed(&env.state_dir, info)?;
    state::touch_marker(&env.root)?;
    writeln!(out, "Seeded: {image}").map_err(io)?;
    Ok(())
}
