//! `--help` (and so the man page) groups the watch options under headings:
//! each heading is shown, in order, and every option sits under one, for
//! `jitterwatch` and `jitterwatch serve` alike.

use clap::CommandFactory;

use super::heading;
use super::Cli;

/// The sections of a rendered help: (heading, the long flags listed under
/// it), in order. A heading is a line that starts in column 0 and ends
/// with ':' ("Usage:" is one line and lists no options).
fn sections(help: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in help.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            out.push((line.trim_end_matches(':').to_string(), Vec::new()));
        } else if let Some((_, flags)) = out.last_mut() {
            // An option's first line: "  -h, --help" or "      --cpus <CPUS>".
            let t = line.trim_start();
            let flag = t.strip_prefix("-h, ").or(t.strip_prefix("-V, ")).unwrap_or(t);
            if let Some(long) = flag.strip_prefix("--") {
                flags.push(long.split([' ', '=', '[']).next().unwrap_or_default().to_string());
            }
        }
    }
    out
}

fn check(cmd: &mut clap::Command) {
    let help = cmd.render_help().to_string();
    let secs = sections(&help);
    let names: Vec<&str> = secs.iter().map(|(h, _)| h.as_str()).filter(|h| heading::ALL.contains(h)).collect();
    assert_eq!(names, heading::ALL, "headings missing or out of order in\n{help}");
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let Some(long) = arg.get_long() else { continue };
        let under: Vec<&str> = secs.iter().filter(|(_, f)| f.iter().any(|x| x == long)).map(|(h, _)| h.as_str()).collect();
        match long {
            // clap's own flags stay under its "Options".
            "help" | "version" => assert_eq!(under, ["Options"], "--{long} in\n{help}"),
            _ => {
                let h = arg.get_help_heading().unwrap_or_else(|| panic!("--{long} has no help_heading"));
                assert!(heading::ALL.contains(&h), "--{long} is under {h:?}, not one of heading::ALL");
                assert_eq!(under, [h], "--{long} should be listed once, under {h:?}, in\n{help}");
            }
        }
    }
}

#[test]
fn watch_options_are_grouped_under_headings() {
    let mut cmd = Cli::command();
    cmd.build();
    check(&mut cmd);
    // serve takes the same options, under the same headings.
    let serve = cmd.find_subcommand_mut("serve").expect("serve subcommand");
    check(serve);
}

#[test]
fn sections_reads_clap_help() {
    // The check above would pass vacuously if this found no flags.
    let help = "Usage: x\n\nOptions:\n  -h, --help  Print help\n\nWatch:\n      --cpus <CPUS>  CPUs\n      --rt [<PRIO>]  FIFO\n";
    let s = sections(help);
    assert_eq!(s[0], ("Options".to_string(), vec!["help".to_string()]));
    assert_eq!(s[1], ("Watch".to_string(), vec!["cpus".to_string(), "rt".to_string()]));
}

#[test]
fn man_page_has_a_section_per_heading() {
    let mut roff = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut roff).unwrap();
    let roff = String::from_utf8(roff).unwrap();
    for h in heading::ALL {
        assert!(
            roff.contains(&format!(".SH {}", h.to_uppercase())) || roff.contains(&format!(".SH \"{}\"", h.to_uppercase())),
            "no section {h} in\n{roff}"
        );
    }
}
