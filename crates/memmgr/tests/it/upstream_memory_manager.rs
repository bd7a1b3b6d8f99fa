//! Upstream `memory_manager_test.go` (`TestValidateReservedMemory`,
//! `TestGetSystemReservedMemory`, `TestNewManager`) and `policy_static_test.go`
//! (`TestStaticPolicyNew`, `TestStaticPolicyName`) of v1.36, as facts: the reservation
//! checks and their messages, through `MemoryManagerConfig` and `MemoryManager::new`.
//! `Q(n)` upstream is a decimal SI quantity of `n` (`"n"` here); `B(n)` binary SI (`"1Gi"`).

use corral_checkpoint::StateFile;
use std::collections::BTreeMap;

use corral_memmgr::{
    ConfigError, MEMORY, MemoryManager, MemoryManagerConfig, MemoryPolicy, MemoryReservation,
    SystemReserved, check_system_reserved,
};
use corral_topology::memory::NumaMemory;
use corral_topology::{Quantity, QuantitySum};

const HP2M: &str = "hugepages-2Mi";
const HP1G: &str = "hugepages-1Gi";
const GI: u64 = 1 << 30;

/// Upstream `returnMachineInfo()`: two nodes of 10Gi with five 1Gi pages each (nodes
/// without memory, as `TestValidateReservedMemory`'s, check the same).
fn machine() -> BTreeMap<usize, NumaMemory> {
    crate::support::numa_memory(2, 10 * GI, 1 << 20, 5)
}

/// A config: `allocatable` (resource, quantity text) as the node allocatable reservation,
/// `reserved` as `reservedMemory` entries (node, [(resource, quantity text)]).
fn config(
    policy: MemoryPolicy,
    allocatable: &[(&str, &str)],
    reserved: &[(usize, &[(&str, &str)])],
) -> MemoryManagerConfig {
    let node_allocatable_reservation = allocatable
        .iter()
        .map(|&(resource, text)| {
            let mut sum = QuantitySum::new(None);
            sum.add(&Quantity::parse(text).unwrap()).unwrap();
            (resource.to_owned(), sum)
        })
        .collect();
    let reserved_memory = reserved
        .iter()
        .map(|&(node, limits)| MemoryReservation::new(node, limits.iter().copied()).unwrap())
        .collect();
    MemoryManagerConfig {
        policy,
        reserved_memory,
        node_allocatable_reservation,
        ..Default::default()
    }
}

fn not_equal(reserved: &str, resource: &str, allocatable: &str) -> String {
    format!(
        "the total amount {reserved:?} of type {resource:?} is not equal to the value {allocatable:?} determined by Node Allocatable feature"
    )
}

/// `TestValidateReservedMemory`, every row (upstream asserts only its error rows; here the
/// others must pass).
#[test]
fn validate_reserved_memory() {
    let both: &[(usize, &[(&str, &str)])] = &[
        (0, &[(MEMORY, "12"), (HP2M, "70"), (HP1G, "13")]),
        (1, &[(MEMORY, "5"), (HP2M, "7")]),
    ];
    let rows: Vec<(&str, MemoryManagerConfig, Option<String>)> = vec![
        (
            "Node Allocatable not set, reserved not set",
            config(MemoryPolicy::Static, &[], &[]),
            None,
        ),
        (
            "Node Allocatable set to zero, reserved set to zero",
            config(MemoryPolicy::Static, &[(MEMORY, "0")], &[(0, &[(MEMORY, "0")])]),
            None,
        ),
        (
            "Node Allocatable not set (equal zero), reserved set",
            config(MemoryPolicy::Static, &[], &[(0, &[(MEMORY, "12")])]),
            Some(not_equal("12", MEMORY, "0")),
        ),
        (
            "Node Allocatable set, reserved not set",
            config(MemoryPolicy::Static, &[(HP2M, "5")], &[]),
            Some(not_equal("0", HP2M, "5")),
        ),
        (
            "Reserved not equal to Node Allocatable",
            config(MemoryPolicy::Static, &[(MEMORY, "5")], &[(0, &[(MEMORY, "12")])]),
            Some(not_equal("12", MEMORY, "5")),
        ),
        (
            "Reserved contains the NUMA node that does not exist under the machine",
            config(
                MemoryPolicy::Static,
                &[(MEMORY, "17")],
                &[(0, &[(MEMORY, "12")]), (2, &[(MEMORY, "5")])],
            ),
            Some(
                "the reserved memory configuration references a NUMA node 2 that does not exist on this machine"
                    .to_owned(),
            ),
        ),
        (
            "Reserved total equal to Node Allocatable",
            config(
                MemoryPolicy::Static,
                &[(MEMORY, "17"), (HP2M, "77"), (HP1G, "13")],
                both,
            ),
            None,
        ),
        (
            "Reserved total hugapages-2M not equal to Node Allocatable",
            config(
                MemoryPolicy::Static,
                &[(MEMORY, "17"), (HP2M, "14"), (HP1G, "13")],
                both,
            ),
            Some(not_equal("77", HP2M, "14")),
        ),
    ];
    for (name, config, expected) in rows {
        let got = config
            .check_reserved_memory(&machine())
            .err()
            .map(|e| e.to_string());
        assert_eq!(got, expected, "{name}");
    }
}

/// `TestGetSystemReservedMemory` (and `TestConvertPreReserved`'s empty row): every node is
/// present, maybe without reservations.
#[test]
fn get_system_reserved_memory() {
    let empty: SystemReserved = BTreeMap::from([(0, BTreeMap::new()), (1, BTreeMap::new())]);
    assert_eq!(
        config(MemoryPolicy::Static, &[], &[]).system_reserved(&machine()),
        Ok(empty)
    );
    assert_eq!(
        config(MemoryPolicy::Static, &[], &[(0, &[(MEMORY, "1Gi")])])
            .system_reserved(&machine())
            .unwrap_err()
            .to_string(),
        not_equal("1Gi", MEMORY, "0")
    );
    let per_node = BTreeMap::from([(MEMORY.to_owned(), GI)]);
    assert_eq!(
        config(
            MemoryPolicy::Static,
            &[(MEMORY, "2Gi")],
            &[(0, &[(MEMORY, "1Gi")]), (1, &[(MEMORY, "1Gi")])],
        )
        .system_reserved(&machine()),
        Ok(BTreeMap::from([(0, per_node.clone()), (1, per_node)]))
    );
}

/// `TestNewManager`, every row.
#[test]
fn new_manager() {
    let both_1gi: &[(usize, &[(&str, &str)])] = &[(0, &[(MEMORY, "1Gi")]), (1, &[(MEMORY, "1Gi")])];
    let created = MemoryManager::new(
        &config(MemoryPolicy::Static, &[(MEMORY, "2Gi")], both_1gi),
        &machine(),
    )
    .unwrap();
    assert_eq!(created.policy().name(), "Static");
    let state = created_state(&created);
    assert_eq!(state, [(0, GI), (1, GI)]);
    let err = MemoryManager::new(
        &config(
            MemoryPolicy::Static,
            &[(MEMORY, "2Gi")],
            &[(0, &[(MEMORY, "1Gi")]), (1, &[(MEMORY, "2Gi")])],
        ),
        &machine(),
    )
    .unwrap_err();
    assert_eq!(err.to_string(), not_equal("3Gi", MEMORY, "2Gi"));
    let err = MemoryManager::new(&config(MemoryPolicy::Static, &[], &[]), &machine()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "[memorymanager] you should specify the system reserved memory"
    );
    assert_eq!(
        MemoryPolicy::parse("fake").unwrap_err().to_string(),
        "unknown policy: \"fake\""
    );
    let none = MemoryManager::new(&config(MemoryPolicy::None, &[], &[]), &machine()).unwrap();
    assert_eq!(none.policy().name(), "None");
}

/// Each node's system-reserved `memory` in a started manager's machine state.
fn created_state(manager: &MemoryManager) -> Vec<(usize, u64)> {
    manager.start(StateFile::in_memory()).unwrap();
    manager
        .machine_state()
        .unwrap()
        .iter()
        .map(|(&node, state)| (node, state.memory[MEMORY].system_reserved))
        .collect()
}

/// `TestStaticPolicyNew` and `TestStaticPolicyName`.
#[test]
fn static_policy_new() {
    assert_eq!(
        check_system_reserved(&SystemReserved::new()),
        Err(ConfigError::NoSystemReserved)
    );
    let reserved: SystemReserved = BTreeMap::from([
        (0, BTreeMap::new()),
        (1, BTreeMap::from([(MEMORY.to_owned(), 512 << 20)])),
    ]);
    assert_eq!(check_system_reserved(&reserved), Ok(()));
    assert_eq!(MemoryPolicy::Static.name(), "Static");
}
