//! Device choice: upstream `devicesToAllocate` and `filterByAffinity`, on the core state.
//!
//! The order is upstream's: devices the container already holds (a restart), devices init
//! containers left for reuse, then — with `available = healthy − allocated` split by the
//! container's NUMA affinity — the plugin's preferred allocation among the aligned devices
//! when they suffice; otherwise all aligned devices, then the plugin's preference among the
//! rest, then unaligned devices, then devices without topology. Where upstream ranges over a
//! Go set (a random pick), corral takes devices in byte-wise id order.
//!
//! Unlike upstream, a failing call gives back every device it marked allocated.

use std::collections::BTreeSet;

use corral_topology::NumaMask;

use crate::AllocateError;
use crate::bitset::BitSet;
use crate::pod_devices::{ContainerAllocation, NumaDeviceIds};
use crate::resource_devices::ResourceDevices;
use crate::state::{DeviceState, PreferredRequest, Reservation};
use corral_proto::deviceplugin::v1beta1::ContainerAllocateResponse;

/// Fake NUMA node id of devices without topology (upstream `nodeWithoutTopology`).
pub const NODE_WITHOUT_TOPOLOGY: i64 = -1;

/// One call of the device choice for a container and resource.
#[derive(Debug, Clone)]
pub struct AllocationRequest<'a> {
    /// Pod uid.
    pub pod_uid: &'a str,
    /// Container name.
    pub container: &'a str,
    /// Resource name.
    pub resource: &'a str,
    /// Devices the container asks for.
    pub required: usize,
    /// Devices of this resource the pod's init containers left for reuse.
    pub reusable: Option<&'a BTreeSet<String>>,
    /// The container's NUMA affinity from the topology manager (`None`: no affinity).
    pub affinity: Option<NumaMask>,
    /// The container was running before a restart (upstream `isContainerAlreadyRunning`
    /// while sources are not ready): nothing to allocate.
    pub already_running: bool,
}

impl<'a> AllocationRequest<'a> {
    /// A request without reuse, affinity or restart knowledge.
    pub fn new(pod_uid: &'a str, container: &'a str, resource: &'a str, required: usize) -> Self {
        AllocationRequest {
            pod_uid,
            container,
            resource,
            required,
            reusable: None,
            affinity: None,
            already_running: false,
        }
    }
}

/// The outcome of [`DeviceState::devices_to_allocate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToAllocate {
    /// Nothing to allocate (already held, already running, or a zero request).
    Nothing,
    /// These devices are reserved for the container: call the plugin's `Allocate`, then
    /// [`DeviceState::commit`] or [`DeviceState::release`].
    Devices(Reservation),
    /// The plugin offers a preferred allocation and none was given: nothing was taken; ask
    /// the plugin, then call again with its answer.
    AskPlugin(PreferredRequest),
}

/// The three sets `filterByAffinity` splits available devices into.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AffinitySplit {
    /// On a NUMA node of the affinity.
    pub aligned: BTreeSet<String>,
    /// On NUMA nodes, none of them in the affinity.
    pub unaligned: BTreeSet<String>,
    /// Without topology (or only on the fake node -1).
    pub no_affinity: BTreeSet<String>,
}

struct Split {
    aligned: BitSet,
    unaligned: BitSet,
    no_affinity: BitSet,
}

fn split(table: &ResourceDevices, available: &BitSet, affinity: Option<NumaMask>) -> Split {
    let (Some(mask), true) = (affinity, table.topology_aligned) else {
        return Split {
            aligned: BitSet::default(),
            unaligned: BitSet::default(),
            no_affinity: available.clone(),
        };
    };
    let bits = mask.as_u64();
    let len = table.listed.len().max(available.len()) + 64;
    let mut out = Split {
        aligned: BitSet::with_len(len),
        unaligned: BitSet::with_len(len),
        no_affinity: BitSet::with_len(len),
    };
    for i in available.iter() {
        let listed = table.listed.contains(i);
        let slot = table.slot(i);
        if !listed || !slot.has_topology() {
            out.no_affinity.insert(i);
        } else if slot.bits & bits != 0 {
            out.aligned.insert(i);
        } else if slot.has_real_node {
            out.unaligned.insert(i);
        } else {
            out.no_affinity.insert(i);
        }
    }
    out
}

/// Devices taken so far by one call.
struct Taking<'t> {
    table: &'t mut ResourceDevices,
    taken: Vec<usize>,
    taken_set: BitSet,
    newly_allocated: Vec<usize>,
    needed: usize,
}

impl Taking<'_> {
    /// Upstream `allocateRemainingFrom`: true once nothing more is needed.
    fn take_from(&mut self, candidates: impl IntoIterator<Item = usize>) -> bool {
        self.table.has_allocated = true;
        for i in candidates {
            if self.taken_set.contains(i) {
                continue;
            }
            if !self.table.allocated.contains(i) {
                self.table.allocated.insert(i);
                self.newly_allocated.push(i);
            }
            self.taken_set.insert(i);
            self.taken.push(i);
            self.needed -= 1;
            if self.needed == 0 {
                return true;
            }
        }
        false
    }

    fn roll_back(&mut self) {
        for &i in &self.newly_allocated {
            self.table.allocated.remove(i);
        }
    }

    fn ids(&self, set: impl Iterator<Item = usize>) -> Vec<String> {
        let mut ids: Vec<String> = set.map(|i| self.table.id(i).to_owned()).collect();
        ids.sort();
        ids
    }
}

impl DeviceState {
    /// Upstream `filterByAffinity`: split `available` by the NUMA affinity.
    pub fn filter_by_affinity(
        &self,
        resource: &str,
        available: &BTreeSet<String>,
        affinity: Option<NumaMask>,
    ) -> AffinitySplit {
        let Some(table) = self.resources.get(resource) else {
            return AffinitySplit {
                no_affinity: available.clone(),
                ..AffinitySplit::default()
            };
        };
        let mut set = BitSet::default();
        let mut unknown = BTreeSet::new();
        for id in available {
            match table.index_of(id) {
                Some(i) => set.insert(i),
                None => {
                    unknown.insert(id.clone());
                }
            }
        }
        let parts = split(table, &set, affinity);
        let mut out = AffinitySplit {
            aligned: table.ids_of(&parts.aligned).into_iter().collect(),
            unaligned: table.ids_of(&parts.unaligned).into_iter().collect(),
            no_affinity: table.ids_of(&parts.no_affinity).into_iter().collect(),
        };
        if table.topology_aligned && affinity.is_some() {
            out.no_affinity.extend(unknown);
        } else {
            out.no_affinity = available.clone();
        }
        out
    }

    /// Upstream `devicesToAllocate`. `preferred` is the plugin's answer to the
    /// [`PreferredRequest`] a previous call returned (`None` when not asked yet).
    ///
    /// On success with devices, they are marked allocated and reserved; on error, nothing
    /// stays marked.
    pub fn devices_to_allocate(
        &mut self,
        request: &AllocationRequest<'_>,
        preferred: Option<&BTreeSet<String>>,
    ) -> Result<ToAllocate, AllocateError> {
        let resource = request.resource;
        let held = self
            .pod_devices
            .container_devices(request.pod_uid, request.container, resource);
        let mut needed = request.required;
        if let Some(held) = &held {
            if held.len() != request.required {
                return Err(AllocateError::ChangedRequest {
                    pod_uid: request.pod_uid.to_owned(),
                    container: request.container.to_owned(),
                    resource: resource.to_owned(),
                    allocated: held.len(),
                    required: request.required,
                });
            }
            needed = 0;
        }
        if request.already_running {
            tracing::debug!(
                resource,
                pod = request.pod_uid,
                container = request.container,
                "container detected running, nothing to do"
            );
            return Ok(ToAllocate::Nothing);
        }
        let registered = self.resources.get(resource).filter(|t| t.has_healthy);
        let Some(table) = registered else {
            return Err(AllocateError::Unregistered {
                resource: resource.to_owned(),
            });
        };
        if table.healthy.is_empty() {
            return Err(AllocateError::NoHealthyDevices {
                resource: resource.to_owned(),
            });
        }
        let all_healthy = held.iter().flatten().all(|id| {
            table
                .index_of(id)
                .is_some_and(|i| table.healthy.contains(i))
        });
        if !all_healthy {
            return Err(AllocateError::PreviouslyAllocatedUnhealthy {
                resource: resource.to_owned(),
            });
        }
        if needed == 0 {
            return Ok(ToAllocate::Nothing);
        }
        let endpoint = self.endpoints.get(resource).copied();
        let table = self.resources.get_mut(resource).expect("checked above");
        let reusable: Vec<usize> = request
            .reusable
            .into_iter()
            .flatten()
            .map(|id| table.intern(id))
            .collect();
        let mut taking = Taking {
            table,
            taken: Vec::with_capacity(needed),
            taken_set: BitSet::default(),
            newly_allocated: Vec::new(),
            needed,
        };
        let outcome = choose(&mut taking, request, reusable, endpoint, preferred);
        match outcome {
            Ok(true) => {
                let devices: Vec<String> = taking
                    .taken
                    .iter()
                    .map(|&i| taking.table.id(i).to_owned())
                    .collect();
                tracing::debug!(resource, pod = request.pod_uid, container = request.container,
                    devices = %devices.join(","), "devices chosen");
                Ok(ToAllocate::Devices(self.new_reservation(resource, devices)))
            }
            Ok(false) => unreachable_shortfall(&mut taking, request.required),
            Err(Interrupt::Ask(ask)) => {
                taking.roll_back();
                Ok(ToAllocate::AskPlugin(PreferredRequest {
                    resource: resource.to_owned(),
                    ..ask
                }))
            }
            Err(Interrupt::Fail(err)) => {
                taking.roll_back();
                Err(err)
            }
        }
    }

    /// Record a reservation as the container's allocation with the plugin's response
    /// (upstream `podDevices.insert`), devices grouped by the NUMA nodes their plugin
    /// reports now.
    pub fn commit(
        &mut self,
        reservation: &Reservation,
        pod_uid: &str,
        container: &str,
        response: ContainerAllocateResponse,
    ) {
        let table = self.resource_mut(&reservation.resource);
        let mut devices = NumaDeviceIds::new();
        for id in &reservation.devices {
            match table
                .slot_of(id)
                .and_then(|s| s.nodes.as_ref())
                .filter(|n| !n.is_empty())
            {
                Some(nodes) => {
                    for &node in nodes {
                        devices.entry(node).or_default().push(id.clone());
                    }
                }
                None => devices
                    .entry(NODE_WITHOUT_TOPOLOGY)
                    .or_default()
                    .push(id.clone()),
            }
        }
        self.pod_devices.insert(
            pod_uid,
            container,
            &reservation.resource,
            ContainerAllocation {
                devices,
                response: Some(response),
            },
        );
        self.reservations.remove(&reservation.id);
    }

    /// Remove what [`commit`](Self::commit) recorded for a container and resource, and free
    /// its devices (corral's give-back on a failed admission).
    pub fn uncommit(&mut self, pod_uid: &str, container: &str, resource: &str) {
        self.pod_devices.remove(pod_uid, container, resource);
        self.regenerate_allocated();
    }
}

enum Interrupt {
    Ask(PreferredRequest),
    Fail(AllocateError),
}

fn unreachable_shortfall(
    taking: &mut Taking<'_>,
    required: usize,
) -> Result<ToAllocate, AllocateError> {
    let got = required - taking.needed;
    taking.roll_back();
    Err(AllocateError::Shortfall { required, got })
}

/// The body of `devicesToAllocate` after the checks: `Ok(true)` when enough was taken.
fn choose(
    taking: &mut Taking<'_>,
    request: &AllocationRequest<'_>,
    reusable: Vec<usize>,
    endpoint: Option<crate::EndpointInfo>,
    preferred: Option<&BTreeSet<String>>,
) -> Result<bool, Interrupt> {
    if taking.take_from(reusable) {
        return Ok(true);
    }
    let available = taking.table.healthy.difference(&taking.table.allocated);
    if available.len() < taking.needed {
        return Err(Interrupt::Fail(AllocateError::Unavailable {
            resource: request.resource.to_owned(),
            requested: taking.needed,
            available: available.len(),
        }));
    }
    let parts = split(taking.table, &available, request.affinity);
    // Ask the plugin (or use its answer): the preferred ids, as indices.
    let ask = |taking: &Taking<'_>, pool: &BitSet| -> Result<Vec<usize>, Interrupt> {
        let Some(endpoint) = endpoint else {
            return Err(Interrupt::Fail(AllocateError::EndpointNotFound {
                resource: request.resource.to_owned(),
            }));
        };
        if !endpoint
            .options
            .is_some_and(|o| o.get_preferred_allocation_available)
        {
            return Ok(Vec::new());
        }
        match preferred {
            Some(answer) => Ok(taking.table.known(answer).collect()),
            None => {
                let mut from = pool.clone();
                for &i in &taking.taken {
                    from.insert(i);
                }
                Err(Interrupt::Ask(PreferredRequest {
                    resource: String::new(),
                    available: taking.ids(from.iter()),
                    must_include: taking.ids(taking.taken.iter().copied()),
                    size: request.required,
                }))
            }
        }
    };
    if taking.needed < parts.aligned.len() {
        let answer = ask(taking, &parts.aligned)?;
        let within: Vec<usize> = answer
            .into_iter()
            .filter(|&i| parts.aligned.contains(i))
            .collect();
        if taking.take_from(within) || taking.take_from(parts.aligned.iter()) {
            return Ok(true);
        }
        return Ok(false);
    }
    if taking.take_from(parts.aligned.iter()) {
        return Ok(true);
    }
    let answer = ask(taking, &available)?;
    let within: Vec<usize> = answer
        .into_iter()
        .filter(|&i| available.contains(i))
        .collect();
    Ok(taking.take_from(within)
        || taking.take_from(parts.unaligned.iter())
        || taking.take_from(parts.no_affinity.iter()))
}
