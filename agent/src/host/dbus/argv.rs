//! The bootc command lines that stage an image, as pure functions of what this bootc
//! supports and what the BootcNode asks.

use bootc_crds::pool::SignaturePolicy;

/// bootc's flag that makes the host's `containers-policy.json` decide whether an image
/// may be fetched (and refuses a policy that accepts anything by default). `switch`
/// takes it and records it in the image reference it stages (`signature:
/// containerPolicy`), which a later `upgrade` follows; bootc 1.16.9's `upgrade` refuses
/// it (exit 2).
pub const ENFORCE_SIGPOLICY: &str = "--enforce-container-sigpolicy";

/// The commands, each an argv starting with `bootc`, that stage `reference` locked:
/// `bootc switch --download-only PIN` when this bootc has it (`download_only`), else
/// `bootc switch PIN` then `bootc upgrade --download-only`. With
/// [`SignaturePolicy::Enforce`] the `switch` carries [`ENFORCE_SIGPOLICY`]; the
/// `upgrade` that locks its deployment pulls the reference `switch` recorded, under the
/// same policy.
pub fn staging_commands(
    bootc: &str,
    reference: &str,
    download_only: bool,
    policy: SignaturePolicy,
) -> Vec<Vec<String>> {
    let argv = |args: &[&str]| {
        std::iter::once(bootc)
            .chain(args.iter().copied())
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let mut switch = vec!["switch"];
    if download_only {
        switch.push("--download-only");
    }
    match policy {
        SignaturePolicy::Default => {}
        SignaturePolicy::Enforce => switch.push(ENFORCE_SIGPOLICY),
    }
    switch.push(reference);
    if download_only {
        vec![argv(&switch)]
    } else {
        vec![argv(&switch), argv(&["upgrade", "--download-only"])]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PIN: &str = "quay.io/example/os@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    fn joined(commands: Vec<Vec<String>>) -> Vec<String> {
        commands.into_iter().map(|c| c.join(" ")).collect()
    }

    #[test]
    fn switch_download_only_with_and_without_enforce() {
        let default = staging_commands("/usr/bin/bootc", PIN, true, SignaturePolicy::Default);
        assert_eq!(
            joined(default),
            [format!("/usr/bin/bootc switch --download-only {PIN}")]
        );
        let enforce = staging_commands("/usr/bin/bootc", PIN, true, SignaturePolicy::Enforce);
        assert_eq!(
            joined(enforce),
            [format!(
                "/usr/bin/bootc switch --download-only --enforce-container-sigpolicy {PIN}"
            )]
        );
    }

    #[test]
    fn switch_then_upgrade_with_and_without_enforce() {
        let default = staging_commands("/usr/bin/bootc", PIN, false, SignaturePolicy::Default);
        assert_eq!(
            joined(default),
            [
                format!("/usr/bin/bootc switch {PIN}"),
                "/usr/bin/bootc upgrade --download-only".to_owned()
            ]
        );
        // The flag goes on `switch` only: 1.16.9's `upgrade` refuses it, and follows the
        // reference `switch` recorded with it.
        let enforce = staging_commands("/usr/bin/bootc", PIN, false, SignaturePolicy::Enforce);
        assert_eq!(
            joined(enforce),
            [
                format!("/usr/bin/bootc switch --enforce-container-sigpolicy {PIN}"),
                "/usr/bin/bootc upgrade --download-only".to_owned()
            ]
        );
    }

    #[test]
    fn the_image_is_always_the_last_argument_of_switch() {
        for download_only in [false, true] {
            for policy in [SignaturePolicy::Default, SignaturePolicy::Enforce] {
                let commands = staging_commands("bootc", PIN, download_only, policy);
                assert_eq!(commands[0][1], "switch");
                assert_eq!(commands[0].last().map(String::as_str), Some(PIN));
                assert_eq!(
                    commands[0]
                        .iter()
                        .filter(|a| *a == ENFORCE_SIGPOLICY)
                        .count(),
                    usize::from(policy == SignaturePolicy::Enforce)
                );
            }
        }
    }
}
