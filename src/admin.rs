//! `shoal admin`: operator commands against a running control plane's API,
//! logged in as a platform admin.

use std::io::BufRead;

use anyhow::Context;
use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::Value;

use crate::client::{ControlPlane, secret};

#[derive(Args)]
pub(crate) struct AdminArgs {
    #[command(flatten)]
    control_plane: ControlPlane,
    /// The platform admin to log in as; the password is taken from
    /// SHOAL_ADMIN_PASSWORD, or read from the first line of stdin.
    #[arg(long, env = "SHOAL_ADMIN_EMAIL")]
    email: String,
    /// Print the API's JSON answers as they are.
    #[arg(long)]
    json: bool,
    #[command(subcommand)]
    command: AdminCommand,
}

#[derive(Subcommand)]
enum AdminCommand {
    /// List every tenant with its usage and quota.
    Tenants,
    /// Set a tenant's quota, or one of its databases' (a JSON quota object,
    /// e.g. '{"in_memory_bytes": 1073741824, "write_units_per_sec": 5000}').
    SetQuota {
        /// The tenant's id (see `tenants`).
        tenant: String,
        /// The quota object; fields left out are unlimited.
        quota: String,
        /// Set the quota of this database of the tenant instead.
        #[arg(long)]
        database: Option<String>,
    },
    /// Make another platform admin; its password is taken from
    /// SHOAL_NEW_ADMIN_PASSWORD, or read from the next line of stdin.
    CreateAdmin { email: String },
    /// Suspend a tenant: its users are locked out and its API keys stop working.
    Suspend { tenant: String },
    /// Resume a suspended tenant.
    Resume { tenant: String },
}

pub(crate) async fn run(args: &AdminArgs) -> anyhow::Result<()> {
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let password = secret("SHOAL_ADMIN_PASSWORD", &mut lines, "the admin's password")?;
    let client = args.control_plane.log_in(&args.email, &password).await?;
    let result = match &args.command {
        AdminCommand::Tenants => client.call(Method::GET, "/admin/tenants", None).await?,
        AdminCommand::SetQuota {
            tenant,
            quota,
            database,
        } => {
            let quota: Value = serde_json::from_str(quota).context("the quota is not JSON")?;
            let path = match database {
                Some(db) => format!("/admin/tenants/{tenant}/databases/{db}/quota"),
                None => format!("/admin/tenants/{tenant}/quota"),
            };
            client.call(Method::PUT, &path, Some(quota)).await?
        }
        AdminCommand::CreateAdmin { email } => {
            let password = secret(
                "SHOAL_NEW_ADMIN_PASSWORD",
                &mut lines,
                "the new admin's password",
            )?;
            let body = serde_json::json!({"email": email, "password": password});
            client
                .call(Method::POST, "/admin/admins", Some(body))
                .await?
        }
        AdminCommand::Suspend { tenant } => {
            client
                .call(
                    Method::POST,
                    &format!("/admin/tenants/{tenant}/suspend"),
                    None,
                )
                .await?
        }
        AdminCommand::Resume { tenant } => {
            client
                .call(
                    Method::POST,
                    &format!("/admin/tenants/{tenant}/resume"),
                    None,
                )
                .await?
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
        return Ok(());
    }
    match &args.command {
        AdminCommand::Tenants => print_tenants(&result),
        AdminCommand::SetQuota { .. } => println!("quota set: {}", result["quota"]),
        AdminCommand::CreateAdmin { .. } => {
            println!("admin {} created", result["email"].as_str().unwrap_or(""))
        }
        AdminCommand::Suspend { tenant } => println!("tenant {tenant} suspended"),
        AdminCommand::Resume { tenant } => println!("tenant {tenant} resumed"),
    }
    Ok(())
}

fn print_tenants(result: &Value) {
    println!(
        "{:<20} {:<24} {:<10} {:>14} {:>14} {:>5} {:>6} {:>5}",
        "ID", "NAME", "STATUS", "MEMORY", "MEMORY QUOTA", "DBS", "TABLES", "KEYS"
    );
    for t in result["tenants"].as_array().into_iter().flatten() {
        let quota = match t["quota"]["in_memory_bytes"].as_u64() {
            Some(bytes) => bytes.to_string(),
            None => "unlimited".into(),
        };
        println!(
            "{:<20} {:<24} {:<10} {:>14} {:>14} {:>5} {:>6} {:>5}",
            t["id"].as_str().unwrap_or(""),
            t["name"].as_str().unwrap_or(""),
            t["status"].as_str().unwrap_or(""),
            t["usage"]["in_memory_bytes"],
            quota,
            t["usage"]["databases"],
            t["usage"]["tables"],
            t["usage"]["api_keys"],
        );
    }
}
