//! The device manager as a `HintProvider` on any thread: hints come from its memory, so
//! they are answered inside a current-thread runtime (where `block_in_place` panics) and
//! on a plain thread without any runtime — and so is the allocation of a container that
//! asks nothing of device plugins, even from a manager that never started.

use crate::support::*;
use corral_devicemgr::{DeviceManager, DeviceManagerConfig};
use corral_topology::topologymanager::Grant;
use corral_topology::{AffinityStore, HintProvider, Pod, ProviderHints};

const GPU: &str = "example.com/gpu";

/// What the topology manager asks of a provider for `pod` (its first container asks a
/// GPU, its second nothing): container hints, pod hints, and the second's allocation.
type Answers = (ProviderHints, ProviderHints, Result<Grant, String>);

fn ask(manager: &DeviceManager, pod: &Pod) -> Answers {
    let store = AffinityStore::new();
    (
        manager.hints_for_container(pod, &pod.containers[0]),
        manager.hints_for_pod(pod),
        HintProvider::allocate(manager, pod, &pod.containers[1], &store)
            .map_err(|err| format!("{err}: {:?}", std::error::Error::source(&err))),
    )
}

/// `ask` from a plain thread (no runtime) and from inside a current-thread runtime.
fn ask_without_a_multi_thread_runtime(manager: &DeviceManager, pod: &Pod) -> [Answers; 2] {
    let plain = std::thread::scope(|s| s.spawn(|| ask(manager, pod)).join().unwrap());
    let current_thread = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async { ask(manager, pod) });
    [plain, current_thread]
}

fn gpu_pod() -> Pod {
    pod(
        "uid-1",
        vec![],
        vec![container("app", &[(GPU, 1)]), container("plain", &[])],
    )
}

#[test]
fn hints_and_plain_allocation_need_no_runtime_thread() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (manager, plugin) = runtime.block_on(async {
        let manager = manager(config(dir.path(), vec![0, 1])).await;
        let plugin = plugin(&manager, sample(dir.path(), GPU, "gpu", 2, &[0, 1])).await;
        (manager, plugin)
    });
    let pod = gpu_pod();
    let expected = runtime.block_on(async { ask(&manager, &pod) });
    assert!(
        expected.0.as_ref().is_some_and(|h| h[GPU].is_some()),
        "{expected:?}"
    );
    assert!(
        expected.1.as_ref().is_some_and(|h| h[GPU].is_some()),
        "{expected:?}"
    );
    assert_eq!(expected.2, Ok(Grant::default()));
    for answers in ask_without_a_multi_thread_runtime(&manager, &pod) {
        assert_eq!(answers, expected);
    }
    runtime.block_on(async {
        plugin.stop().await;
        manager.stop().await;
    });
}

#[test]
fn a_manager_that_never_started_answers_without_a_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let manager = DeviceManager::new(DeviceManagerConfig::new(dir.path(), vec![0, 1])).unwrap();
    let pod = gpu_pod();
    for answers in ask_without_a_multi_thread_runtime(&manager, &pod) {
        // Nobody registered the GPU: it is not a device-plugin resource (yet), so there
        // is no preference and nothing to allocate.
        assert_eq!(
            answers,
            (
                Some(Default::default()),
                Some(Default::default()),
                Ok(Grant::default())
            )
        );
    }
}
