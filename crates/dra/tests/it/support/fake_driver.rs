//! An in-memory DRA driver ([`FakeDriver`]) for the manager tests: answers as told,
//! counts its calls, keeps the set of claims it holds prepared, and runs a test's [`Hook`]
//! inside each call.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use corral_dra::{
    ClaimRef, DriverCallError, DriverClients, PrepareResults, PreparedDevice, UnprepareResults,
};

/// The driver name the fake registers as.
pub const FAKE_DRIVER: &str = "test-driver";
/// The request name of the devices it prepares by default.
pub const FAKE_REQUEST: &str = "test-request";

/// What the fake driver answers.
#[derive(Clone)]
pub enum Answer {
    /// One device per claim, named after the claim uid (upstream's default fake answer).
    Devices,
    /// A fixed per-uid map.
    Fixed(PrepareResults),
    /// The call fails as a whole.
    CallError(&'static str),
}

/// Run inside each call before it answers (`"prepare"` or `"unprepare"`, the claims): a
/// test's look at the disk, or a child's wait to be killed.
pub type Hook = Box<dyn Fn(&'static str, &[ClaimRef]) + Send + Sync>;

pub struct FakeDriver {
    pub registered: Vec<&'static str>,
    pub prepare: Mutex<Answer>,
    pub unprepare: Mutex<Option<UnprepareResults>>,
    pub prepare_calls: AtomicU32,
    pub unprepare_calls: AtomicU32,
    /// The claim uids it holds prepared: those it answered a device list for and has not
    /// unprepared since.
    pub prepared: Mutex<BTreeSet<String>>,
    /// Set at most once, by the test.
    pub hook: Arc<OnceLock<Hook>>,
}

impl FakeDriver {
    /// Registered as [`FAKE_DRIVER`], answering prepare calls with `answer`.
    pub fn new(answer: Answer) -> Self {
        FakeDriver {
            registered: vec![FAKE_DRIVER],
            prepare: Mutex::new(answer),
            unprepare: Mutex::new(None),
            prepare_calls: AtomicU32::new(0),
            unprepare_calls: AtomicU32::new(0),
            prepared: Mutex::default(),
            hook: Arc::default(),
        }
    }

    /// Registered as no driver at all.
    pub fn unregistered() -> Self {
        FakeDriver {
            registered: vec![],
            ..Self::new(Answer::CallError("not registered"))
        }
    }
}

impl FakeDriver {
    fn run_hook(&self, call: &'static str, claims: &[ClaimRef]) {
        if let Some(hook) = self.hook.get() {
            hook(call, claims);
        }
    }
}

pub fn device_for(claim: &ClaimRef) -> PreparedDevice {
    PreparedDevice {
        request_names: vec![FAKE_REQUEST.into()],
        pool_name: "worker-1-pool".into(),
        device_name: "dev-1".into(),
        cdi_device_ids: vec![format!("{FAKE_DRIVER}/test=claim-{}", claim.uid)],
        share_id: None,
    }
}

impl DriverClients for FakeDriver {
    fn is_registered(&self, driver: &str) -> bool {
        self.registered.contains(&driver)
    }

    async fn node_prepare_resources(
        &self,
        _driver: &str,
        claims: &[ClaimRef],
    ) -> Result<PrepareResults, DriverCallError> {
        self.prepare_calls.fetch_add(1, Ordering::SeqCst);
        self.run_hook("prepare", claims);
        let answer = self.prepare.lock().unwrap().clone();
        let results: PrepareResults = match answer {
            Answer::Devices => claims
                .iter()
                .map(|c| (c.uid.clone(), Ok(vec![device_for(c)])))
                .collect(),
            Answer::Fixed(map) => map,
            Answer::CallError(message) => return Err(DriverCallError::Other(message.into())),
        };
        let mut prepared = self.prepared.lock().unwrap();
        prepared.extend(
            results
                .iter()
                .filter(|(_, r)| r.is_ok())
                .map(|(uid, _)| uid.clone()),
        );
        Ok(results)
    }

    async fn node_unprepare_resources(
        &self,
        _driver: &str,
        claims: &[ClaimRef],
    ) -> Result<UnprepareResults, DriverCallError> {
        self.unprepare_calls.fetch_add(1, Ordering::SeqCst);
        self.run_hook("unprepare", claims);
        let results: UnprepareResults = match self.unprepare.lock().unwrap().clone() {
            Some(map) => map,
            None => claims.iter().map(|c| (c.uid.clone(), Ok(()))).collect(),
        };
        let mut prepared = self.prepared.lock().unwrap();
        for (uid, _) in results.iter().filter(|(_, r)| r.is_ok()) {
            prepared.remove(uid);
        }
        Ok(results)
    }
}
