//! The README's first command, as CI can run it: `bootc-sim demo` is what `scripts/demo`
//! runs once it has installed the packages and built the binaries. Ten simulated nodes
//! (real systemd under systemd-nspawn, real agents and the real controller binary) go
//! from v1 to v2 following `:stable`; the run must end with exit 0, every node updated,
//! the history of both images printed, and everything it started stopped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::Instant;

#[test]
fn the_demo_rolls_v2_out_to_ten_nodes_and_exits_zero() {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_bootc-sim"))
        .args(["demo", "--phase-timeout-s", "150"])
        .output()
        .unwrap();
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bootc-sim demo failed ({}) after {took:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    eprintln!("bootc-sim demo: exit 0 after {took:?}");
    for line in stdout.lines().filter(|l| {
        l.contains("] rolled out")
            || l.contains("updatedCount")
            || l.contains("most reboot slots")
            || l.starts_with("torn down")
    }) {
        eprintln!("  {line}");
    }

    // Not a terminal: plain lines, no cursor movement.
    assert!(!stdout.contains('\u{1b}'), "escape codes on a pipe");
    assert!(
        stdout.contains("rolled out v2 to 10 nodes"),
        "stdout:\n{stdout}"
    );
    let field = |name: &str| {
        stdout
            .lines()
            .find_map(|l| l.trim().strip_prefix(name).map(str::trim))
            .unwrap_or_else(|| panic!("no {name} in:\n{stdout}"))
    };
    assert_eq!(field("nodeCount"), "10");
    assert_eq!(field("updatedCount"), "10");
    assert_eq!(field("degradedCount"), "0");
    let slots: u32 = field("most reboot slots held at once:").parse().unwrap();
    assert!(
        (1..=3).contains(&slots),
        "{slots} slots against maxUnavailable 3"
    );
    // deployHistory: an entry for each image, ten nodes each (newest first; the order
    // itself is the history's own tests' business).
    let history: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("deployHistory:"))
        .skip(2)
        .take_while(|l| !l.trim().is_empty() && !l.starts_with("stopping"))
        .collect();
    assert_eq!(history.len(), 2, "{history:#?}");
    for version in ["2.0", "1.0"] {
        let row = history
            .iter()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|c| c.get(1) == Some(&version))
            .unwrap_or_else(|| panic!("no {version} in {history:#?}"));
        assert_eq!(row.get(2), Some(&"10"), "{row:?}");
    }
    assert!(stdout.contains("torn down after"), "stdout:\n{stdout}");
}
