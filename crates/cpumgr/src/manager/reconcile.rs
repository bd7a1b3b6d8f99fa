//! Upstream `reconcileState`: pushing each running container's cpuset to the runtime.

use std::sync::Arc;

use super::{CpuManager, Inner};
use crate::runtime::{ContainerState, ReconcileReport, ReconciledContainer};

impl CpuManager {
    /// Upstream `reconcileState`, once: push each running container's cpuset to the runtime
    /// when it differs from the last one pushed; skip waiting containers, report successes
    /// and failures. corral also returns the unreused CPUs of terminated init containers to
    /// the shared pool (upstream #112228). Does nothing before [`start`](Self::start).
    pub async fn reconcile_once(&self) -> ReconcileReport {
        let mut report = ReconcileReport::default();
        let Some((pods, runtime)) = self
            .lock()
            .edges
            .as_ref()
            .map(|e| (Arc::clone(&e.pods), Arc::clone(&e.runtime)))
        else {
            return report;
        };
        self.remove_stale_from_source(None);
        for pod in pods.active_pods() {
            let entry = |name: &str, id: &str| ReconciledContainer {
                pod_name: pod.name.clone(),
                container_name: name.to_owned(),
                container_id: id.to_owned(),
            };
            let Some(status) = pods.pod_status(&pod.uid) else {
                report.failure.push(entry("", ""));
                continue;
            };
            for (_, container) in pod.all_containers() {
                let name = container.name.as_str();
                let Ok(id) = status.container_id(name) else {
                    report.failure.push(entry(name, ""));
                    continue;
                };
                let Some(cstatus) = status.container_status(name) else {
                    report.failure.push(entry(name, ""));
                    continue;
                };
                match cstatus.state {
                    ContainerState::Waiting | ContainerState::Unknown => {
                        report.failure.push(entry(name, ""));
                        continue;
                    }
                    ContainerState::Terminated => {
                        let mut inner = self.lock();
                        let before = inner.state.clone();
                        let Inner { policy, state, .. } = &mut *inner;
                        if policy.release_terminated_init_container(state, &pod, name)
                            && inner.commit(before).is_ok()
                        {
                            report.released_init_containers.push(entry(name, &id));
                        }
                        continue;
                    }
                    ContainerState::Running => {}
                }
                let (cpus, last) = {
                    let mut inner = self.lock();
                    inner.containers.add(&pod.uid, name, &id);
                    // As upstream, an empty assignment is skipped (reported below), except
                    // for an init container whose CPUs corral handed back: it runs in the
                    // shared pool.
                    let released_init = pod
                        .init_containers
                        .iter()
                        .any(|c| c.name == name && !c.is_restartable());
                    let cpus = match inner.state.cpu_set(&pod.uid, name) {
                        Some(cpus) if cpus.is_empty() && released_init => {
                            inner.state.default_cpu_set().clone()
                        }
                        Some(cpus) => cpus.clone(),
                        None => inner.state.default_cpu_set().clone(),
                    };
                    let last = inner.last_update.cpu_set_or_default(&pod.uid, name).clone();
                    (cpus, last)
                };
                if cpus.is_empty() {
                    report.failure.push(entry(name, &id));
                    continue;
                }
                if cpus != last {
                    let quota = self.cfs_quota(&pod.uid, name);
                    let pushed = runtime.update_container_cpuset(&id, &cpus, quota).await;
                    if pushed.is_err() {
                        report.failure.push(entry(name, &id));
                        continue;
                    }
                    self.lock().last_update.set_cpu_set(&pod.uid, name, cpus);
                }
                report.success.push(entry(name, &id));
            }
        }
        report
    }
}
