//! Command-line errors as one line: clap's message, its suggestion (a
//! similar argument or value) and where help is, instead of clap's
//! multi-line block with the usage.

use std::process::ExitCode;

use clap::error::ErrorKind;

/// The usage-error exit code (clap's, and the sim's).
pub const USAGE: u8 = 2;

/// Formats `e` as one line: `railyard: error: <what> [possible values]
/// (tip: <suggestion>); see 'railyard sim --help'`. `args` are the
/// command-line words (to name the subcommand whose help to see).
pub fn one_line(e: &clap::Error, args: &[String]) -> String {
    let text = e.render().to_string();
    // Paragraphs: the message first (it may continue on indented lines),
    // then tips, possible values, the usage and "For more information".
    let mut paragraphs = text.split("\n\n").map(|p| {
        p.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
    });
    let first = paragraphs.next().unwrap_or_default().join(" ");
    let what = first.strip_prefix("error: ").unwrap_or(&first).to_string();
    let mut s = format!("railyard: error: {}", what.trim_end_matches(':'));
    let mut tips = vec![];
    for p in paragraphs {
        for l in p {
            if let Some(t) = l.strip_prefix("tip: ") {
                tips.push(t.to_string());
            } else if l.starts_with("[possible values") {
                s.push(' ');
                s.push_str(l);
            }
        }
    }
    if !tips.is_empty() {
        s.push_str(&format!(" ({})", tips.join("; ")));
    }
    s.push_str(&format!("; see '{} --help'", command_of(args)));
    s
}

/// `railyard` and its subcommand, if `args` (after the program name)
/// name one.
fn command_of(args: &[String]) -> String {
    match args
        .iter()
        .find(|a| !a.starts_with('-'))
        .map(String::as_str)
    {
        Some(sub @ ("sim" | "bench")) => format!("railyard {sub}"),
        _ => "railyard".into(),
    }
}

/// Prints `e` (help and version to stdout, exit 0; anything else as one
/// line on stderr, exit 2).
pub fn exit_with(e: &clap::Error, args: &[String]) -> ExitCode {
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(USAGE)
        }
        _ => {
            eprintln!("{}", one_line(e, args));
            ExitCode::from(USAGE)
        }
    }
}
