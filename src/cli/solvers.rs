//! `remat solvers`: the registry, as a list or JSON.

use super::render::print_json;
use super::CliError;
use crate::solve;

pub(super) fn run(json: bool) -> Result<i32, CliError> {
    let infos: Vec<_> = solve::registry().iter().map(|s| s.info()).collect();
    if json {
        print_json(&infos);
        return Ok(0);
    }
    for i in infos {
        println!(
            "{:<16} {:<26} {}\n{:<16} {}",
            i.name,
            i.scope.as_str(),
            i.accepts,
            "",
            i.description
        );
    }
    Ok(0)
}
