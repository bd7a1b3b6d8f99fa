//! The memory manager's errors.

/// Why the default machine state cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MachineStateError {
    /// More is reserved (or taken by huge pages) than a node has: upstream's `uint64`
    /// subtraction would wrap to an absurd allocatable size.
    #[error("NUMA node {node}: {what} ({taken} bytes) exceeds its {resource} ({total} bytes)")]
    Overcommitted {
        /// The node.
        node: usize,
        /// The resource (`memory`, `hugepages-2Mi`…).
        resource: String,
        /// What takes it: "system reserved", "system reserved and huge pages".
        what: &'static str,
        /// Bytes taken.
        taken: u64,
        /// Bytes the node has.
        total: u64,
    },
    /// A NUMA node id the hints' masks cannot hold (upstream's bitmasks hold ids 0 to 63
    /// too; the kubelet's memory manager cannot run on such a machine either).
    #[error("NUMA node id {0} is above 63, the highest id a NUMA mask holds")]
    NodeIdTooLarge(usize),
    /// Reserved memory names a NUMA node the machine does not have.
    #[error(
        "the reserved memory configuration references a NUMA node {0} that does not exist on this machine"
    )]
    UnknownNode(usize),
}

/// Why a checkpoint's machine state is refused (upstream's `validateState` texts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RestoreError {
    /// Assignments without a machine state.
    #[error("[memorymanager] machine state can not be empty when it has memory assignments")]
    EmptyMachineState,
    /// A block on a NUMA node the machine does not have.
    #[error(
        "[memorymanager] (pod: {pod}, container: {container}) the memory assignment uses the NUMA that does not exist"
    )]
    UnknownNode {
        /// The pod uid.
        pod: String,
        /// The container.
        container: String,
    },
    /// A block of a resource the node does not have.
    #[error(
        "[memorymanager] (pod: {pod}, container: {container}) the memory assignment uses memory resource that does not exist"
    )]
    UnknownResource {
        /// The pod uid.
        pod: String,
        /// The container.
        container: String,
    },
    /// The checkpoint's machine state is not what its assignments imply on this machine
    /// (memory added or removed, or reservations changed since it was written).
    #[error("[memorymanager] the expected machine state is different from the real one")]
    MachineStateDiffers,
}

/// Why a container's memory could not be allocated (upstream's `Allocate` texts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AllocateError {
    /// No set of NUMA nodes has the free memory, and the topology manager gave none.
    #[error(
        "[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available"
    )]
    NoDefaultAffinity,
    /// The topology manager's hint was preferred, the best memory could do is not.
    #[error("[memorymanager] failed to find the default preferred hint")]
    NoDefaultPreferredHint,
    /// The affinity's nodes do not hold the request and no wider set does.
    #[error("[memorymanager] failed to find NUMA nodes to extend the current topology hint")]
    NoExtension,
    /// The affinity was preferred, its extension is not.
    #[error("[memorymanager] failed to find the extended preferred hint")]
    NoExtendedPreferredHint,
    /// The nodes hold allocations of another group (or single-node ones).
    #[error("[memorymanager] preferred hint violates NUMA node allocation")]
    ViolatesNumaAllocation,
    /// A pod managed at pod level whose spec leaves containers without memory (upstream's
    /// `EmptyPodSharedPoolError`, with its message).
    #[error(transparent)]
    EmptyPodSharedPool(#[from] EmptyPodSharedPoolError),
}

/// Why a pod managed at pod level leaves a container without memory (upstream
/// `validatePodScopeResources`'s messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EmptyPodSharedPoolError {
    /// An init container that is not a sidecar asks for more of a resource than the pod's
    /// budget has beside the sidecars before it.
    #[error(
        "pod rejected, largest exclusive init container requests {requested} of {resource}, but only {available} available"
    )]
    InitContainerTooLarge {
        /// The resource.
        resource: String,
        /// How much it asks for.
        requested: u64,
        /// The budget less the sidecars' requests.
        available: u64,
    },
    /// A shared init container, with the budget of a resource all taken by sidecars.
    #[error("pod rejected, pod has shared init containers but no {resource} available for them")]
    NoneForSharedInitContainers {
        /// The resource.
        resource: String,
    },
    /// A shared container, with the budget of a resource all taken by exclusive ones.
    #[error(
        "pod rejected, sum of exclusive container {resource} requests equals pod budget, leaving no memory for shared containers"
    )]
    NoneForSharedContainers {
        /// The resource.
        resource: String,
    },
}
