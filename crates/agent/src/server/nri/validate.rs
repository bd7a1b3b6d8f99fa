//! corral's answer to `ValidateContainerAdjustment` (NRI v0.10): with
//! `nriGuardPinnedCpusets` on, another plugin's adjustment that changes the cpuset CPUs or
//! memory nodes corral gave a pinned container is rejected, so the runtime does not create
//! the container; everything else is accepted.
//!
//! The runtime asks every validator after all plugins adjusted a container being created,
//! with the adjustment, the updates to other containers the plugins asked for, and which
//! plugin set each field (`owners`, keyed by container id and `Field`). A container is
//! checked when corral pinned it (exclusive CPUs, or memory the static memory policy put on
//! NUMA nodes), for the field corral pinned: rejected when the field's owner is another
//! plugin, or when the value differs from corral's grant (a runtime that sends no owners).
//! Nothing is written: a validation costs no commit.

use corral_proto::nri::api;
use corral_topology::CpuSet;

use crate::node::Node;

/// What corral pinned one container to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Pinned {
    /// `container <name> of pod <namespace>/<name>`, for the reason.
    pub(super) what: String,
    /// Its exclusive CPUs, when it has any.
    pub(super) cpus: Option<CpuSet>,
    /// The NUMA nodes its memory is pinned to, when the memory manager pinned it.
    pub(super) mems: Option<CpuSet>,
}

/// What corral pinned the container `container_id` to, from its pod's record; `None` for
/// a container corral did not pin (or does not know).
pub(super) fn pinned(node: &Node, container_id: &str) -> Option<Pinned> {
    let uid = node.pods().pod_of_container(container_id)?;
    let admitted = node.pods().get(&uid)?;
    let record = &admitted.record;
    let (name, _) = record
        .container_ids
        .iter()
        .find(|(_, id)| id.as_str() == container_id)?;
    let holding = record.holdings.as_ref()?.get(name)?;
    let cpus = holding
        .exclusive_cpus
        .as_deref()
        .and_then(|cpus| CpuSet::parse(cpus).ok())
        .filter(|cpus| !cpus.is_empty());
    let nodes: Vec<usize> = holding
        .memory
        .values()
        .flat_map(|held| held.numa_affinity.iter().copied())
        .collect();
    let mems = (!nodes.is_empty()).then(|| nodes.into_iter().collect::<CpuSet>());
    if cpus.is_none() && mems.is_none() {
        return None;
    }
    let pod = &admitted.pod;
    Some(Pinned {
        what: format!("container {name} of pod {}/{}", pod.namespace, pod.name),
        cpus,
        mems,
    })
}

/// The answer to `request`: rejected, with every reason, when a plugin other than
/// `corral` (its runtime name, `<index>-<name>`) changes what `pinned` says corral pinned.
pub(super) fn verdict(
    request: &api::ValidateContainerAdjustmentRequest,
    corral: &str,
    pinned: impl Fn(&str) -> Option<Pinned>,
) -> api::ValidateContainerAdjustmentResponse {
    let created = request.container.as_ref().map(|c| c.id.as_str());
    let adjusted = request
        .adjust
        .as_ref()
        .and_then(|a| a.linux.as_ref())
        .and_then(|l| l.resources.as_ref());
    let updated = request.update.iter().map(|u| {
        let resources = u.linux.as_ref().and_then(|l| l.resources.as_ref());
        (u.container_id.as_str(), resources)
    });
    let targets = created.map(|id| (id, adjusted)).into_iter().chain(updated);
    let mut reasons = Vec::new();
    for (id, resources) in targets {
        let Some(pinned) = pinned(id) else {
            continue;
        };
        let cpu = resources.and_then(|r| r.cpu.as_ref());
        let owners = request.owners.as_ref().and_then(|o| o.owners.get(id));
        let owner = |field: api::Field| owners.and_then(|f| f.simple.get(&(field as i32)));
        let fields = [
            (
                "cpuset.cpus",
                &pinned.cpus,
                api::Field::CpuSetCpUs,
                cpu.map(|c| c.cpus.as_str()),
            ),
            (
                "cpuset.mems",
                &pinned.mems,
                api::Field::CpuSetMems,
                cpu.map(|c| c.mems.as_str()),
            ),
        ];
        for (name, granted, field, value) in fields {
            let Some(granted) = granted else {
                continue;
            };
            let value = value.unwrap_or_default();
            let by_other = owner(field).filter(|owner| owner.as_str() != corral);
            let differs = !value.is_empty() && CpuSet::parse(value).ok().as_ref() != Some(granted);
            if by_other.is_none() && !differs {
                continue;
            }
            let by = by_other.map_or_else(|| "an adjustment".to_owned(), |o| format!("plugin {o}"));
            reasons.push(format!(
                "corral pinned {} to {name} {granted}; {by} sets it to {value:?}",
                pinned.what
            ));
        }
    }
    if reasons.is_empty() {
        return api::ValidateContainerAdjustmentResponse::default();
    }
    api::ValidateContainerAdjustmentResponse {
        reject: true,
        reason: format!("{} (nriGuardPinnedCpusets)", reasons.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn resources(cpus: &str, mems: &str) -> Option<api::LinuxResources> {
        Some(api::LinuxResources {
            cpu: Some(api::LinuxCpu {
                cpus: cpus.into(),
                mems: mems.into(),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    /// A validation of container "c1"'s adjustment to `cpus`/`mems`, the fields owned by
    /// `owner`, and an update of "c2" to CPUs 0-1 owned by "10-other".
    fn request(cpus: &str, mems: &str, owner: &str) -> api::ValidateContainerAdjustmentRequest {
        let mut simple = HashMap::new();
        if !cpus.is_empty() {
            simple.insert(api::Field::CpuSetCpUs as i32, owner.to_owned());
        }
        if !mems.is_empty() {
            simple.insert(api::Field::CpuSetMems as i32, owner.to_owned());
        }
        let c2_owners = api::FieldOwners {
            simple: HashMap::from([(api::Field::CpuSetCpUs as i32, "10-other".to_owned())]),
            compound: HashMap::new(),
        };
        let owners = HashMap::from([
            (
                "c1".to_owned(),
                api::FieldOwners {
                    simple,
                    compound: HashMap::new(),
                },
            ),
            ("c2".to_owned(), c2_owners),
        ]);
        api::ValidateContainerAdjustmentRequest {
            container: Some(api::Container {
                id: "c1".into(),
                ..Default::default()
            }),
            adjust: Some(api::ContainerAdjustment {
                linux: Some(api::LinuxContainerAdjustment {
                    resources: resources(cpus, mems),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            update: vec![api::ContainerUpdate {
                container_id: "c2".into(),
                linux: Some(api::LinuxContainerUpdate {
                    resources: resources("0-1", ""),
                }),
                ignore_failure: false,
            }],
            owners: Some(api::OwningPlugins { owners }),
            ..Default::default()
        }
    }

    fn pinned_c1(id: &str) -> Option<Pinned> {
        (id == "c1").then(|| Pinned {
            what: "container app of pod default/web".into(),
            cpus: Some(CpuSet::parse("2-3").unwrap()),
            mems: Some(CpuSet::parse("0").unwrap()),
        })
    }

    const CORRAL: &str = "50-corral";

    #[test]
    fn corrals_own_cpuset_is_accepted() {
        let answer = verdict(&request("2,3", "0", CORRAL), CORRAL, pinned_c1);
        assert_eq!(answer, api::ValidateContainerAdjustmentResponse::default());
    }

    #[test]
    fn another_plugins_cpus_or_mems_for_a_pinned_container_are_rejected() {
        let answer = verdict(&request("0-3", "0", "60-tuner"), CORRAL, pinned_c1);
        assert!(answer.reject);
        assert_eq!(
            answer.reason,
            "corral pinned container app of pod default/web to cpuset.cpus 2-3; plugin 60-tuner \
             sets it to \"0-3\"; corral pinned container app of pod default/web to cpuset.mems \
             0; plugin 60-tuner sets it to \"0\" (nriGuardPinnedCpusets)"
        );
        // Without owners (a runtime that sends none), a different value still tells.
        let mut anonymous = request("0-3", "", "60-tuner");
        anonymous.owners = None;
        let answer = verdict(&anonymous, CORRAL, pinned_c1);
        assert_eq!(
            answer.reason,
            "corral pinned container app of pod default/web to cpuset.cpus 2-3; an adjustment \
             sets it to \"0-3\" (nriGuardPinnedCpusets)"
        );
    }

    #[test]
    fn an_update_of_a_pinned_container_is_checked_like_the_adjustment() {
        let pinned_c2 = |id: &str| {
            (id == "c2").then(|| Pinned {
                what: "container db of pod default/db".into(),
                cpus: Some(CpuSet::parse("4-5").unwrap()),
                mems: None,
            })
        };
        let answer = verdict(&request("", "", CORRAL), CORRAL, pinned_c2);
        assert!(answer.reject);
        assert!(answer.reason.starts_with(
            "corral pinned container db of pod default/db to cpuset.cpus 4-5; plugin 10-other"
        ));
    }

    #[test]
    fn containers_corral_did_not_pin_and_fields_it_did_not_pin_are_left_alone() {
        let nothing_pinned = |_: &str| None;
        let answer = verdict(&request("0-3", "1", "60-tuner"), CORRAL, nothing_pinned);
        assert!(!answer.reject);
        let cpus_only = |id: &str| pinned_c1(id).map(|p| Pinned { mems: None, ..p });
        let answer = verdict(&request("", "1", "60-tuner"), CORRAL, cpus_only);
        assert!(!answer.reject, "{}", answer.reason);
    }
}
