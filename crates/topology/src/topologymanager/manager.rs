//! [`TopologyManager`]: policy + scope + providers + affinity store (upstream
//! `topology_manager.go`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::admission::PodAdmitResult;
use super::budget::{DECISION_STEPS, bounded};
use super::metrics::ManagerMetrics;
use super::numa_info::{NumaDistances, NumaInfo, NumaInfoError, NumaNode};
use super::policy::{Policy, PolicyConfigError, PolicyName, PolicyOptions};
use super::provider::HintProvider;
use super::scope::{Admission, ScopeName};
use super::store::AffinityStore;
use crate::{FeatureGates, Pod, PodLevelResources};

/// The topology manager's configuration, as kubelet config gives it.
///
/// # Example
///
/// ```
/// use std::collections::BTreeMap;
/// use corral_topology::{PolicyName, ScopeName, TopologyManagerConfig};
///
/// let options = BTreeMap::from([("prefer-closest-numa-nodes".to_owned(), "true".to_owned())]);
/// let config = TopologyManagerConfig::from_strings("restricted", "pod", &options)?;
/// assert_eq!((config.policy, config.scope), (PolicyName::Restricted, ScopeName::Pod));
/// assert!(config.options.prefer_closest_numa);
/// assert!(TopologyManagerConfig::from_strings("strict", "pod", &BTreeMap::new()).is_err());
/// # Ok::<(), corral_topology::PolicyConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyManagerConfig {
    /// `topologyManagerPolicy`.
    pub policy: PolicyName,
    /// `topologyManagerScope`.
    pub scope: ScopeName,
    /// `topologyManagerPolicyOptions`, parsed.
    pub options: PolicyOptions,
}

impl TopologyManagerConfig {
    /// [`from_strings_gated`](Self::from_strings_gated) under v1.37's default gates, the
    /// options given.
    pub fn from_strings(
        policy: &str,
        scope: &str,
        options: &BTreeMap<String, String>,
    ) -> Result<TopologyManagerConfig, PolicyConfigError> {
        TopologyManagerConfig::from_strings_gated(
            policy,
            scope,
            Some(options),
            &FeatureGates::v1_37_defaults(),
        )
    }

    /// Parse kubelet config strings under the kubelet's feature gates. Both names are
    /// validated whatever the policy (as kubelet's config validation does); options are
    /// parsed, each checked against its maturity's gate, only for policies other than `none`,
    /// which upstream ignores them for. (`TopologyManagerPolicyOptions` is locked on in
    /// v1.37, so the kubelet's older refusal of any option with that gate off cannot happen.)
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use corral_topology::topologymanager::TopologyManagerConfig;
    /// use corral_topology::{Feature, FeatureGates};
    ///
    /// let options = BTreeMap::from([("prefer-closest-numa-nodes".to_owned(), "true".to_owned())]);
    /// let gates = FeatureGates::default();
    /// let config =
    ///     TopologyManagerConfig::from_strings_gated("best-effort", "pod", Some(&options), &gates)?;
    /// assert!(config.options.prefer_closest_numa);
    /// assert!(FeatureGates::default().with(Feature::TopologyManagerPolicyOptions, false).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_strings_gated(
        policy: &str,
        scope: &str,
        options: Option<&BTreeMap<String, String>>,
        gates: &FeatureGates,
    ) -> Result<TopologyManagerConfig, PolicyConfigError> {
        let policy: PolicyName = policy.parse()?;
        let scope: ScopeName = scope.parse()?;
        let options = match options {
            Some(options) if policy != PolicyName::None => {
                PolicyOptions::from_map_gated(options, gates)?
            }
            _ => PolicyOptions::default(),
        };
        Ok(TopologyManagerConfig {
            policy,
            scope,
            options,
        })
    }
}

/// Why a topology manager could not be built.
///
/// # Example
///
/// ```
/// use std::collections::BTreeMap;
/// use corral_topology::{NumaNode, TopologyManager, TopologyManagerConfig, TopologyManagerError};
///
/// // Upstream's limit: 8 NUMA nodes unless `max-allowable-numa-nodes` says more.
/// let nodes: Vec<NumaNode> = (0..9).map(|id| NumaNode { id, distances: None }).collect();
/// let config = TopologyManagerConfig::from_strings("best-effort", "container", &BTreeMap::new())?;
/// let err = TopologyManager::new(&config, &nodes).unwrap_err();
/// assert!(matches!(err, TopologyManagerError::TooManyNumaNodes { count: 9, max: 8 }));
/// assert_eq!(err.to_string(), "unsupported on machines with more than 8 NUMA Nodes");
/// # Ok::<(), corral_topology::PolicyConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TopologyManagerError {
    /// A bad policy, scope or option.
    #[error(transparent)]
    Config(#[from] PolicyConfigError),
    /// The NUMA nodes could not be used. The message is upstream's
    /// (`cannot discover NUMA topology: %w`), source included, as upstream's `TestNewManager`
    /// checks it; the agent's error printer drops a source a message already ends with.
    #[error("cannot discover NUMA topology: {0}")]
    Numa(#[from] NumaInfoError),
    /// More NUMA nodes than `max-allowable-numa-nodes`.
    #[error("unsupported on machines with more than {max} NUMA Nodes")]
    TooManyNumaNodes {
        /// The machine's NUMA nodes.
        count: usize,
        /// The limit in force.
        max: usize,
    },
}

/// The topology manager.
///
/// # Example
///
/// ```
/// use corral_topology::topologymanager::{TopologyManagerConfig, TopologyManager};
/// use corral_topology::{NumaNode, Pod};
/// use std::collections::BTreeMap;
///
/// let nodes = [0, 1].map(|id| NumaNode { id, distances: None });
/// let config = TopologyManagerConfig::from_strings("single-numa-node", "container", &BTreeMap::new())?;
/// let manager = TopologyManager::new(&config, &nodes)?;
/// let pod = Pod { uid: "p".into(), containers: vec![corral_topology::Container::new("c")], ..Pod::default() };
/// assert!(manager.admit(&pod).admit);
/// assert!(manager.affinity("p", "c").preferred);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct TopologyManager {
    /// `None` for the `none` policy (none scope).
    policy: Policy,
    scope: Option<ScopeName>,
    providers: Vec<Arc<dyn HintProvider>>,
    store: Arc<AffinityStore>,
    metrics: ManagerMetrics,
    pod_level: PodLevelResources,
}

impl std::fmt::Debug for TopologyManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopologyManager")
            .field("policy", &self.policy)
            .field("scope", &self.scope)
            .field("providers", &self.providers.len())
            .finish_non_exhaustive()
    }
}

impl TopologyManager {
    /// Upstream `NewManager`: with the `none` policy, the none scope (whatever the scope);
    /// otherwise the policy over `nodes` (failing on more than `max-allowable-numa-nodes`
    /// nodes, or without distances when prefer-closest is on) in the configured scope.
    pub fn new(
        config: &TopologyManagerConfig,
        nodes: &[NumaNode],
    ) -> Result<TopologyManager, TopologyManagerError> {
        let (policy, scope) = if config.policy == PolicyName::None {
            let numa = NumaInfo::new(&[], NumaDistances::Ignore)?;
            (
                Policy::new(PolicyName::None, numa, PolicyOptions::default()),
                None,
            )
        } else {
            let numa = NumaInfo::new(nodes, config.options.numa_distances())?;
            if numa.nodes().len() > config.options.max_allowable_numa_nodes {
                return Err(TopologyManagerError::TooManyNumaNodes {
                    count: numa.nodes().len(),
                    max: config.options.max_allowable_numa_nodes,
                });
            }
            (
                Policy::new(config.policy, numa, config.options),
                Some(config.scope),
            )
        };
        Ok(TopologyManager {
            policy,
            scope,
            providers: Vec::new(),
            store: Arc::new(AffinityStore::new()),
            metrics: ManagerMetrics::default(),
            pod_level: PodLevelResources::default(),
        })
    }

    /// How pods with pod-level resources are admitted: with
    /// [`PodLevelResources::Managed`] (`PodLevelResourceManagers` on), the pod scope asks
    /// each provider to [`allocate_pod`](HintProvider::allocate_pod) once, and a failed merge
    /// is upstream's `PodLevelTopologyAffinityError` in either scope.
    pub fn with_pod_level_resources(mut self, mode: PodLevelResources) -> TopologyManager {
        self.pod_level = mode;
        self
    }

    /// Add a hint provider; providers are asked and allocate in the order added.
    pub fn add_hint_provider(&mut self, provider: Arc<dyn HintProvider>) {
        self.providers.push(provider);
    }

    /// The policy (upstream `GetPolicy`).
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The scope in force; `None` with the `none` policy.
    pub fn scope(&self) -> Option<ScopeName> {
        self.scope
    }

    /// The affinity store providers read.
    pub fn store(&self) -> &Arc<AffinityStore> {
        &self.store
    }

    /// The admission counters.
    pub fn metrics(&self) -> &ManagerMetrics {
        &self.metrics
    }

    /// Upstream `GetAffinity`.
    pub fn affinity(&self, pod_uid: &str, container_name: &str) -> super::TopologyHint {
        self.store.affinity(pod_uid, container_name)
    }

    /// Upstream `AddContainer`.
    pub fn add_container(&self, pod: &Pod, container_name: &str, container_id: &str) {
        self.store
            .add_container(&pod.uid, container_name, container_id);
    }

    /// Upstream `RemoveContainer` (unknown ids are ignored, as upstream).
    pub fn remove_container(&self, container_id: &str) {
        self.store.remove_container(container_id);
    }

    /// Upstream `Admit`: decide the pod's affinities and allocate its containers.
    ///
    /// Like upstream, a rejection part-way leaves earlier containers allocated; the agent
    /// releases them (and calls [`AffinityStore::remove_pod`]) to make admission
    /// all-or-nothing. The decision's searches share one budget of
    /// [`DECISION_STEPS`](super::DECISION_STEPS); a decision that ran out is
    /// [`approximate`](PodAdmitResult::approximate). A provider's
    /// [`AllocationError::Deferred`](super::AllocationError::Deferred) ends it
    /// [`deferred`](PodAdmitResult::deferred), counted nowhere.
    pub fn admit(&self, pod: &Pod) -> PodAdmitResult {
        self.admit_counting_in(pod, &self.metrics)
    }

    /// [`admit`](Self::admit) counted in none of the manager's metrics: a trial (corral's
    /// `admit --dry-run`), whose caller gives back what the providers granted. The
    /// providers' own counters are theirs to leave alone.
    pub fn admit_uncounted(&self, pod: &Pod) -> PodAdmitResult {
        self.admit_counting_in(pod, &ManagerMetrics::default())
    }

    fn admit_counting_in(&self, pod: &Pod, metrics: &ManagerMetrics) -> PodAdmitResult {
        let started = Instant::now();
        let admission = Admission {
            policy: &self.policy,
            providers: &self.providers,
            store: &self.store,
            metrics,
            pod_level: self.pod_level,
            grants: Default::default(),
        };
        // One budget for the whole decision: every provider's hints, the merges and the
        // allocations.
        let (mut result, effort) = bounded(DECISION_STEPS, || match self.scope {
            None => admission.none_scope(pod),
            Some(ScopeName::Container) => admission.container_scope(pod),
            Some(ScopeName::Pod) => admission.pod_scope(pod),
        });
        result.grants = admission.grants.take();
        if result.deferred {
            // Not a decision: the pod is admitted again once the provider has its answer.
            return result;
        }
        metrics
            .admission_requests_total
            .fetch_add(1, Ordering::Relaxed);
        if !effort.exact {
            result.approximate = true;
            metrics
                .approximate_decisions_total
                .fetch_add(1, Ordering::Relaxed);
        }
        metrics.admission_duration_ms.observe(started.elapsed());
        result
    }
}
