//! [`NonePolicy`]: upstream's `none` policy — every container runs in the shared pool.

use std::collections::BTreeMap;

use corral_topology::{Container, CpuSet, Pod, TopologyHint};

use super::{AllocateError, Policy, ValidationError};
use crate::options::{OptionsError, go_map_string};
use crate::state::CpuState;

/// The `none` policy: no exclusive CPUs, no hints, nothing allocatable.
#[derive(Debug, Clone, Default)]
pub struct NonePolicy;

impl NonePolicy {
    /// The policy; any option is refused with upstream's message.
    pub fn new(options: &BTreeMap<String, String>) -> Result<NonePolicy, OptionsError> {
        if options.is_empty() {
            Ok(NonePolicy)
        } else {
            Err(OptionsError::NoneWithOptions {
                options: go_map_string(options),
            })
        }
    }
}

/// Accept any state, pin nothing, release nothing, nothing allocatable; the hints are the
/// trait's default (no preference).
impl Policy for NonePolicy {
    fn name(&self) -> &'static str {
        "none"
    }

    fn start(&mut self, _state: &mut CpuState) -> Result<(), ValidationError> {
        Ok(())
    }

    fn allocate(
        &mut self,
        _state: &mut CpuState,
        _pod: &Pod,
        _container: &Container,
        _affinity: TopologyHint,
    ) -> Result<(), AllocateError> {
        Ok(())
    }

    fn remove_container(&mut self, _state: &mut CpuState, _pod_uid: &str, _container: &str) {}

    fn allocatable_cpus(&self, _state: &CpuState) -> CpuSet {
        CpuSet::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream `TestNonePolicyName`, `TestNonePolicyAllocate`, `TestNonePolicyRemove`,
    /// `TestNonePolicyGetAllocatableCPUs` (policy_none_test.go) and the options check.
    #[test]
    fn none_policy() {
        let mut policy = NonePolicy::new(&BTreeMap::new()).unwrap();
        assert_eq!(policy.name(), "none");
        let mut state = CpuState::new(CpuSet::from_range(1, 7), BTreeMap::new());
        let before = state.clone();
        let pod = Pod::default();
        let container = Container::new("c");
        policy
            .allocate(&mut state, &pod, &container, TopologyHint::default())
            .unwrap();
        policy.remove_container(&mut state, "p", "c");
        assert_eq!(state, before);
        assert!(policy.allocatable_cpus(&state).is_empty());
        assert!(
            policy
                .hints_for_container(&state, &pod, &container)
                .is_none()
        );
        let options = BTreeMap::from([("full-pcpus-only".to_owned(), "true".to_owned())]);
        assert_eq!(
            NonePolicy::new(&options).unwrap_err().to_string(),
            "None policy: received unsupported options=map[full-pcpus-only:true]"
        );
    }
}
