//! The NRI API messages (`nri.pkg.api.v1alpha1`, generated from `proto/nri/v1alpha1`), the
//! ttrpc names of its two services, and [`EventMask`].

crate::generated_api!("../gen/nri_v1alpha1.rs");

/// The ttrpc service name of the runtime's side (`RegisterPlugin`, `UpdateContainers`).
pub const RUNTIME_SERVICE: &str = "nri.pkg.api.v1alpha1.Runtime";
/// The ttrpc service name of the plugin's side (`Configure`, `CreateContainer`, …).
pub const PLUGIN_SERVICE: &str = "nri.pkg.api.v1alpha1.Plugin";

/// The events a plugin subscribes to, as `ConfigureResponse.events` carries them: bit
/// `event - 1` for each [`Event`] (upstream `EventMask`).
///
/// ```
/// use corral_proto::nri::api::{Event, EventMask};
///
/// let mask = EventMask::of(&[Event::RunPodSandbox, Event::CreateContainer]);
/// assert_eq!(mask.bits(), 0b1001);
/// assert!(mask.contains(Event::CreateContainer));
/// assert!(!mask.contains(Event::StopContainer));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventMask(i32);

impl EventMask {
    /// Every event a v0.8 or v0.9 runtime knows (`RUN_POD_SANDBOX` to `REMOVE_CONTAINER`;
    /// upstream's `ValidEvents` then, `LAST` = 12). Such a runtime refuses a subscription
    /// to any other ("invalid plugin events") and drops the plugin.
    pub const V0_8: EventMask = EventMask((1 << (Event::RemoveContainer as i32)) - 1);
    /// Every event a v0.10 to v0.12 runtime knows (up to `VALIDATE_CONTAINER_ADJUSTMENT`,
    /// `LAST` = 15).
    pub const V0_10: EventMask = EventMask((1 << (Event::Last as i32 - 1)) - 1);

    /// The mask of `events` (`Unknown` and `Last` are not events and add nothing).
    pub fn of(events: &[Event]) -> Self {
        EventMask(events.iter().fold(0, |bits, &e| bits | Self::bit(e)))
    }

    /// The mask as sent on the wire.
    pub fn from_bits(bits: i32) -> Self {
        EventMask(bits)
    }

    /// The bits as sent on the wire.
    pub fn bits(self) -> i32 {
        self.0
    }

    /// Whether `event` is subscribed.
    pub fn contains(self, event: Event) -> bool {
        self.0 & Self::bit(event) != 0
    }

    /// The events in both masks.
    ///
    /// ```
    /// use corral_proto::nri::api::{Event, EventMask};
    ///
    /// let wanted = EventMask::of(&[Event::CreateContainer, Event::UpdatePodSandbox]);
    /// assert_eq!(
    ///     wanted.intersection(EventMask::V0_8),
    ///     EventMask::of(&[Event::CreateContainer])
    /// );
    /// ```
    pub fn intersection(self, other: EventMask) -> EventMask {
        EventMask(self.0 & other.0)
    }

    /// The events of `self` that are not in `other`.
    pub fn difference(self, other: EventMask) -> EventMask {
        EventMask(self.0 & !other.0)
    }

    fn bit(event: Event) -> i32 {
        match event {
            Event::Unknown | Event::Last => 0,
            e => 1 << (e as i32 - 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Event, EventMask};

    /// Upstream's `ValidEvents = (1 << (LAST - 1)) - 1` with v0.8's `LAST = 12` and
    /// v0.10's `LAST = 15` (pkg/api/event.go, api.proto at v0.8.0 and v0.10.0).
    #[test]
    fn the_masks_of_each_release_are_upstreams_valid_events() {
        assert_eq!(EventMask::V0_8.bits(), (1 << (12 - 1)) - 1);
        assert_eq!(EventMask::V0_10.bits(), (1 << (15 - 1)) - 1);
        for new in [
            Event::UpdatePodSandbox,
            Event::PostUpdatePodSandbox,
            Event::ValidateContainerAdjustment,
        ] {
            assert!(!EventMask::V0_8.contains(new), "{new:?}");
            assert!(EventMask::V0_10.contains(new), "{new:?}");
        }
        assert!(EventMask::V0_8.contains(Event::RemoveContainer));
        assert_eq!(Event::ValidateContainerAdjustment as i32, 14);
        assert_eq!(
            EventMask::of(&[Event::UpdatePodSandbox, Event::ValidateContainerAdjustment]).bits(),
            (1 << 11) | (1 << 13)
        );
    }
}
