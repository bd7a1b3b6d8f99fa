//! `corral admit -f FILE… [--dry-run]`: send each pod of the manifests to the agent's
//! admission API and print what each container got or why the pod was refused (what each
//! NUMA node had free, each hint provider's hints, the merged best hint).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use corral_proto::corral::v1 as api;

use super::client::{ClientError, answer, request, with_client};
use super::numa_nodes::{explanation_json, explanation_lines};
use super::status::{allocation_json, print_table};
use crate::cli::{AgentTarget, OutputFormat};
use crate::commands::explain::read_manifests;
use crate::commands::print_document;
use crate::config::PodLimits;
use crate::manifest::pod_from_manifest;
use crate::output::outln;

/// Whether an admission is made or only tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trial {
    /// Admit for real.
    Real,
    /// `--dry-run`: answer as an admission would, changing nothing.
    DryRun,
}

/// Admit the pods of `files` (or, with [`Trial::DryRun`], ask what their admission would
/// answer) and print each answer; exit 1 when one was rejected.
pub(crate) fn admit(
    target: &AgentTarget,
    files: &[PathBuf],
    output: OutputFormat,
    trial: Trial,
) -> Result<ExitCode> {
    let manifests = read_manifests(files)?;
    let claims: Vec<Vec<u8>> = manifests
        .claims
        .iter()
        .map(serde_json::to_vec)
        .collect::<Result<_, _>>()?;
    let slices: Vec<Vec<u8>> = manifests
        .slices
        .iter()
        .map(serde_json::to_vec)
        .collect::<Result<_, _>>()?;
    let mut requests = Vec::new();
    let mut names = Vec::new();
    for mut pod in manifests.pods {
        let converted = pod_from_manifest(&pod, &PodLimits::DEFAULT)?;
        pod.metadata.uid = Some(converted.uid.clone());
        names.push(format!("{}/{}", converted.namespace, converted.name));
        requests.push(api::AdmitRequest {
            pod_json: serde_json::to_vec(&pod)?,
            resource_claims_json: claims.clone(),
            resource_slices_json: slices.clone(),
            dry_run: trial == Trial::DryRun,
        });
    }
    if requests.is_empty() {
        anyhow::bail!("no Pod in {files:?}");
    }
    // A call that fails does not hide the answers before it: they are printed, then the
    // failure, with a non-zero exit.
    let (answers, failed) = with_client(target, async |mut client, socket| {
        if trial == Trial::DryRun {
            // An agent that does not know `dry_run` would admit for real; one that serves
            // ListNumaNodes (the same release) knows it.
            let call = client.list_numa_nodes(request(
                api::ListNumaNodesRequest {},
                target.request_timeout,
            ));
            match answer(socket, call, target.request_timeout).await {
                Err(ClientError::Answered {
                    code: tonic::Code::Unimplemented,
                    ..
                }) => anyhow::bail!("the agent is older than `admit --dry-run`: nothing was sent"),
                other => {
                    other?;
                }
            }
        }
        let mut answers = Vec::new();
        for message in requests {
            let call = client.admit(request(message, target.request_timeout));
            match answer(socket, call, target.request_timeout).await {
                Ok(answer) if trial == Trial::DryRun && !answer.dry_run => {
                    anyhow::bail!(
                        "the agent did not answer as a dry run: it may have admitted the pod (`corral status`)"
                    );
                }
                Ok(answer) => answers.push(answer),
                Err(err) => return Ok((answers, Some(err))),
            }
        }
        Ok((answers, None))
    })?;
    let rejected = answers.iter().any(|a| !a.admitted);
    match output {
        OutputFormat::Json | OutputFormat::Yaml => {
            let doc: Vec<_> = answers
                .iter()
                .zip(&names)
                .map(|(a, name)| {
                    let mut doc = serde_json::json!({
                        "pod": name,
                        "admitted": a.admitted,
                        "reason": a.reason,
                        "message": a.message,
                        "allocation": a.allocation.as_ref().map(allocation_json),
                    });
                    if let Some(explanation) = &a.explanation {
                        doc["explanation"] = explanation_json(explanation);
                    }
                    if trial == Trial::DryRun {
                        doc["dryRun"] = true.into();
                    }
                    doc
                })
                .collect();
            print_document(&serde_json::Value::from(doc), output == OutputFormat::Yaml)?;
        }
        OutputFormat::Table | OutputFormat::Wide => {
            for (answer, name) in answers.iter().zip(&names) {
                match &answer.allocation {
                    Some(pod) if answer.admitted => {
                        let verdict = match trial {
                            Trial::DryRun => "would be admitted (dry run: nothing was changed)",
                            Trial::Real => "admitted",
                        };
                        outln!(
                            "pod {}/{} {verdict} (uid {})",
                            pod.namespace,
                            pod.name,
                            pod.uid
                        );
                        print_table(std::slice::from_ref(pod), output == OutputFormat::Wide)?;
                    }
                    _ => {
                        let verdict = match trial {
                            Trial::DryRun => "would be rejected (dry run)",
                            Trial::Real => "rejected",
                        };
                        eprintln!(
                            "pod {name} {verdict}: {}: {}",
                            answer.reason, answer.message
                        );
                        for line in answer.explanation.iter().flat_map(explanation_lines) {
                            eprintln!("{line}");
                        }
                    }
                }
            }
        }
    }
    if let Some(err) = failed {
        let pod = &names[answers.len()];
        return Err(anyhow::Error::from(err).context(format!("admitting pod {pod}")));
    }
    Ok(if rejected {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
