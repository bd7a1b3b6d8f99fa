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
                        if inner.trial {
                            // Undone with the trial: the next pass releases it.
                            continue;
                        }
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
                    // What stands: never a trial's CPUs (`admit --dry-run`).
                    let state = inner.settled_state();
                    let cpus = match state.cpu_set(&pod.uid, name) {
                        Some(cpus) if cpus.is_empty() && released_init => {
                            state.default_cpu_set().clone()
                        }
                        Some(cpus) => cpus.clone(),
                        None => state.default_cpu_set().clone(),
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use corral_checkpoint::StateFile;
    use corral_topology::{Container, CpuSet, Pod, TopologyHint};

    use crate::{
        CfsQuota, ContainerMap, ContainerRuntime, ContainerState, ContainerStatus, PodSource,
        PodStatus, RuntimeError,
    };

    /// One running shared-pool container, `sp/shared`, id `containerd://shared`, and the
    /// pod being tried (in flight, as corral's pod source lists it; no status yet).
    struct SharedPod;
    impl PodSource for SharedPod {
        fn active_pods(&self) -> Vec<Pod> {
            let mut shared = Container::new("shared");
            shared.resources.requests.cpu_millis = Some(500);
            vec![
                Pod {
                    uid: "sp".into(),
                    containers: vec![shared],
                    ..Pod::default()
                },
                trial_pod(),
            ]
        }
        fn pod_status(&self, uid: &str) -> Option<PodStatus> {
            if uid != "sp" {
                return None;
            }
            Some(PodStatus {
                init_container_statuses: Vec::new(),
                container_statuses: vec![ContainerStatus {
                    name: "shared".into(),
                    container_id: "containerd://shared".into(),
                    state: ContainerState::Running,
                }],
            })
        }
    }

    /// A Guaranteed pod of 2 CPUs.
    fn trial_pod() -> Pod {
        let mut app = Container::new("app");
        for list in [&mut app.resources.requests, &mut app.resources.limits] {
            list.cpu_millis = Some(2000);
            list.memory_bytes = Some(1 << 30);
        }
        Pod {
            uid: "trial".into(),
            containers: vec![app],
            ..Pod::default()
        }
    }

    /// Every cpuset pushed.
    #[derive(Default)]
    struct Recorded(Mutex<Vec<CpuSet>>);
    #[crate::async_trait]
    impl ContainerRuntime for Recorded {
        async fn update_container_cpuset(
            &self,
            _: &str,
            cpus: &CpuSet,
            _: CfsQuota,
        ) -> Result<(), RuntimeError> {
            self.0.lock().unwrap().push(cpus.clone());
            Ok(())
        }
    }

    /// A reconcile pass while a trial (`admit --dry-run`) holds CPUs pushes the pool as
    /// it stands, never the pool less the trial's CPUs, and a trial keeps none of the
    /// pass's stale-state sweep.
    #[tokio::test]
    async fn a_reconcile_pass_during_a_trial_pushes_the_settled_pool() {
        let manager = crate::manager::test_machine::eight_cpu_static_manager();
        let runtime = Arc::new(Recorded::default());
        manager
            .start(
                StateFile::in_memory(),
                Arc::new(SharedPod),
                Arc::clone(&runtime) as Arc<dyn ContainerRuntime>,
                ContainerMap::new(),
            )
            .unwrap();
        manager.reconcile_once().await;
        let pool = runtime.0.lock().unwrap().clone();
        assert_eq!(pool.len(), 1, "the shared container pinned once");

        let trial_pod = trial_pod();
        let trial = manager.begin_trial();
        manager
            .allocate(
                &trial_pod,
                &trial_pod.containers[0],
                TopologyHint::default(),
            )
            .unwrap();
        manager.reconcile_once().await;
        manager.end_trial(trial);
        assert_eq!(
            *runtime.0.lock().unwrap(),
            pool,
            "a reconcile pass pushed the trial's shrunk pool"
        );
        manager.reconcile_once().await;
        assert_eq!(*runtime.0.lock().unwrap(), pool);
    }
}
