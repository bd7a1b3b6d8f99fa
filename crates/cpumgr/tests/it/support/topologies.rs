//! Upstream's test topologies (`corral_testkit::upstream_topologies`) as the
//! [`TopologyIndex`]es the tests build policies and managers on, under the same names.

use std::sync::Arc;

use corral_cpumgr::TopologyIndex;
use corral_cpumgr::test_util::topology_index;
use corral_testkit::upstream_topologies::{self as upstream, Machine};

/// The index of a plain machine (the testkit's fixtures, the conformance files' topologies).
pub(crate) fn index(machine: &Machine) -> Arc<TopologyIndex> {
    topology_index(machine.cpu_ids(), machine.counts.values())
}

macro_rules! indexed {
    ($($name:ident),* $(,)?) => {
        $(
            #[doc = concat!("`corral_testkit::upstream_topologies::", stringify!($name), "`, indexed.")]
            pub(crate) fn $name() -> Arc<TopologyIndex> {
                index(&upstream::$name())
            }
        )*
    };
}

indexed!(
    single_socket_ht,
    dual_socket_ht,
    triple_socket_ht,
    dual_socket_no_ht,
    dual_socket_multi_numa_per_socket_ht,
    fake_multi_socket_dual_socket_per_numa_ht,
    quad_socket_four_way_ht,
    hints_machine_info,
    single_socket_four_cores_no_ht,
    reconcile_dual_socket,
);
