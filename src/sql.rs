//! `shoal sql "SELECT …"`: an ndbinfo query through the control plane, as
//! the user it logs in as (a tenant's user sees its own databases; a
//! platform admin, all).

use std::io::BufRead;

use clap::Args;
use reqwest::Method;
use serde_json::{Value, json};

use crate::client::{ControlPlane, secret};

#[derive(Args)]
pub(crate) struct SqlArgs {
    #[command(flatten)]
    control_plane: ControlPlane,
    /// The user to log in as; the password is taken from SHOAL_PASSWORD, or
    /// read from the first line of stdin.
    #[arg(long, env = "SHOAL_EMAIL")]
    email: String,
    /// Print the answer's JSON as it is.
    #[arg(long)]
    json: bool,
    /// One SELECT over the ndbinfo tables and views, e.g.
    /// "SELECT * FROM ndbinfo.table_memory_usage".
    sql: String,
}

pub(crate) async fn run(args: &SqlArgs) -> anyhow::Result<()> {
    let mut lines = std::io::stdin().lock().lines();
    let password = secret("SHOAL_PASSWORD", &mut lines, "the password")?;
    let client = args.control_plane.log_in(&args.email, &password).await?;
    let answer = client
        .call(
            Method::POST,
            "/ndbinfo/query",
            Some(json!({"sql": args.sql})),
        )
        .await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&answer)?);
    } else {
        print_table(&answer);
    }
    Ok(())
}

/// The answer as an aligned table, as the mysql client prints one.
fn print_table(answer: &Value) {
    let columns: Vec<String> = answer["columns"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c.as_str().unwrap_or("").to_owned())
        .collect();
    let rows: Vec<Vec<String>> = answer["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|row| {
            row.as_array()
                .into_iter()
                .flatten()
                .map(|cell| match cell {
                    Value::Null => "NULL".to_owned(),
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect()
        })
        .collect();
    let widths: Vec<usize> = (0..columns.len())
        .map(|i| {
            rows.iter()
                .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                .chain([columns[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("| {} |", padded.join(" | "));
    };
    let rule: String = widths
        .iter()
        .map(|w| format!("+{}", "-".repeat(w + 2)))
        .collect::<String>()
        + "+";
    println!("{rule}");
    line(&columns);
    println!("{rule}");
    for row in &rows {
        line(row);
    }
    println!("{rule}");
    println!(
        "{} row{} in set",
        rows.len(),
        if rows.len() == 1 { "" } else { "s" }
    );
}
