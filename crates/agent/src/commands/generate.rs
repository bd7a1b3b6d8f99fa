//! `corral completions SHELL` and `corral man`: the shell completion script and the man
//! page, generated from the command line itself by clap's own crates (`clap_complete`,
//! `clap_mangen`), so they name every command and flag the binary takes.

use std::process::ExitCode;

use anyhow::Result;
use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;

/// The completion script for `shell`, completing the `corral` command.
pub(crate) fn completion_script(shell: Shell) -> Vec<u8> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "corral", &mut script);
    script
}

/// A `corral man` argument that names no command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no command `corral {}` (`corral man` lists them)", path.join(" "))]
pub(crate) struct UnknownCommand {
    /// The words given.
    pub(crate) path: Vec<String>,
}

/// The command line as the pages describe it: built (so each command knows its full
/// name, `corral-config-check`), without the `help` command.
fn built_command() -> clap::Command {
    let mut command = Cli::command().disable_help_subcommand(true);
    command.build();
    command
}

/// The man page (section 1) of `corral` or, given the words of a command (`run`,
/// `config check`), of that command (`corral-config-check(1)`, the page `corral`'s
/// SUBCOMMANDS section refers to): its synopsis, every flag, examples.
pub(crate) fn man_page(path: &[String]) -> Result<Vec<u8>> {
    let mut command = built_command();
    for word in path {
        command = command
            .find_subcommand(word)
            .cloned()
            .ok_or_else(|| UnknownCommand {
                path: path.to_vec(),
            })?;
    }
    let mut page = Vec::new();
    clap_mangen::Man::new(command).render(&mut page)?;
    Ok(page)
}

pub(crate) fn completions(shell: Shell) -> Result<ExitCode> {
    crate::output::bytes(&completion_script(shell))?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn man(path: &[String]) -> Result<ExitCode> {
    crate::output::bytes(&man_page(path)?)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command of the command line, as a user types it.
    fn subcommands() -> Vec<String> {
        Cli::command()
            .get_subcommands()
            .map(|command| command.get_name().to_owned())
            .collect()
    }

    #[test]
    fn completion_scripts_name_every_command() {
        let names = subcommands();
        for expected in ["run", "admit", "release", "config", "completions", "man"] {
            assert!(
                names.iter().any(|n| n == expected),
                "{expected} in {names:?}"
            );
        }
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let script = String::from_utf8(completion_script(shell)).unwrap();
            for name in &names {
                assert!(script.contains(name.as_str()), "{shell}: {name}");
            }
            for flag in ["reserved-memory", "feature-gates", "root-dir", "host-root"] {
                assert!(script.contains(flag), "{shell}: {flag}");
            }
        }
        let zsh = String::from_utf8(completion_script(Shell::Zsh)).unwrap();
        assert!(zsh.starts_with("#compdef corral"), "{zsh}");
        let fish = String::from_utf8(completion_script(Shell::Fish)).unwrap();
        assert!(fish.contains("complete -c corral"), "{fish}");
    }

    /// Requests of the man(7) macro package and the few roff requests it allows.
    const MAN_REQUESTS: &[&str] = &[
        "TH", "SH", "SS", "TP", "IP", "PP", "P", "LP", "RS", "RE", "B", "I", "BR", "IR", "RB",
        "RI", "br", "sp", "nf", "fi", "ie", "el", "if", "ds", "\\\"", "EX", "EE",
    ];

    /// `page` is roff for man(7): a title line, then only requests of the man package.
    fn assert_man_roff(page: &str, title: &str) {
        assert!(
            page.lines()
                .any(|l| l.starts_with(&format!(".TH {title} 1"))),
            "{title}: {page}"
        );
        for line in page.lines() {
            let Some(request) = line.strip_prefix('.').or_else(|| line.strip_prefix('\'')) else {
                continue;
            };
            let name = request.split_whitespace().next().unwrap_or("");
            assert!(
                MAN_REQUESTS.contains(&name),
                "{title}: {name:?} in {line:?}"
            );
        }
    }

    fn page(path: &[&str]) -> String {
        let path: Vec<String> = path.iter().map(|w| (*w).to_owned()).collect();
        String::from_utf8(man_page(&path).unwrap()).unwrap()
    }

    /// corral's page has the sections of a man page and names each command's own page in
    /// SUBCOMMANDS; each of those pages exists, is man roff, and lists its flags.
    #[test]
    fn man_pages_are_man_roff_for_every_command() {
        let top = page(&[]);
        assert_man_roff(&top, "corral");
        for section in [
            "NAME",
            "SYNOPSIS",
            "DESCRIPTION",
            "OPTIONS",
            "SUBCOMMANDS",
            "VERSION",
        ] {
            assert!(top.contains(&format!(".SH {section}")), "{section}: {top}");
        }
        assert!(!top.contains("corral\\-help(1)"), "no page for `help`");
        for name in subcommands().iter().filter(|n| *n != "help") {
            // clap_mangen names each command's page: corral\-run(1).
            assert!(
                top.contains(&format!("corral\\-{name}(1)")),
                "{name}: {top}"
            );
            assert_man_roff(&page(&[name]), &format!("corral-{name}"));
        }
        let run = page(&["run"]);
        for flag in [
            "reserved\\-memory",
            "feature\\-gates",
            "root\\-dir",
            "demo\\-devices",
        ] {
            assert!(run.contains(flag), "{flag}: {run}");
        }
        let check = page(&["config", "check"]);
        assert_man_roff(&check, "corral-config-check");
        assert!(check.contains("host\\-root"), "{check}");
        let err = man_page(&["config".into(), "nope".into()]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no command `corral config nope` (`corral man` lists them)"
        );
    }
}
