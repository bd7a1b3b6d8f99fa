//! The observer sees what upstream exposes as metrics: one registration per validated
//! Register call (refused ones not counted) and one duration per Allocate RPC.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::*;
use corral_devicemgr::DeviceManagerObserver;

const GPU: &str = "example.com/gpu";

#[derive(Default)]
struct Recorder {
    registered: Mutex<Vec<String>>,
    allocations: Mutex<Vec<(String, Duration)>>,
}

impl DeviceManagerObserver for Recorder {
    fn plugin_registered(&self, resource: &str) {
        self.registered.lock().unwrap().push(resource.to_owned());
    }

    fn allocate_rpc_finished(&self, resource: &str, duration: Duration) {
        self.allocations
            .lock()
            .unwrap()
            .push((resource.to_owned(), duration));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registrations_and_allocate_durations_are_reported() {
    let (dir, manager) = started(vec![0]).await;
    let recorder = Arc::new(Recorder::default());
    manager.set_observer(recorder.clone());
    let plugin = plugin(&manager, sample(dir.path(), GPU, "gpu", 2, &[0])).await;
    assert_eq!(*recorder.registered.lock().unwrap(), vec![GPU.to_owned()]);

    let app = container("app", &[(GPU, 1)]);
    let pod = pod("uid-1", vec![], vec![app.clone()]);
    manager.allocate(&pod, &app, None).await.unwrap();
    // A second allocate for the same container needs no RPC, and reports none.
    manager.allocate(&pod, &app, None).await.unwrap();
    let allocations = recorder.allocations.lock().unwrap().clone();
    assert_eq!(allocations.len(), 1, "{allocations:?}");
    assert_eq!(allocations[0].0, GPU);
    assert!(allocations[0].1 < WAIT);
    manager.stop().await;
    plugin.stop().await;
}
