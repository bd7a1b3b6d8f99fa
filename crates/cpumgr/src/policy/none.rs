//! [`NonePolicy`]: upstream's `none` policy — every container runs in the shared pool.

use std::collections::BTreeMap;

use super::Policy;
use crate::options::{OptionsError, go_map_string};

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

/// Every method is the trait's default, which is this policy: accept any state, pin nothing,
/// release nothing, no preference, nothing allocatable.
impl Policy for NonePolicy {
    fn name(&self) -> &'static str {
        "none"
    }
}

#[cfg(test)]
mod tests {
    use corral_topology::{Container, CpuSet, Pod, TopologyHint};

    use super::*;
    use crate::state::CpuState;

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
