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

    fn bit(event: Event) -> i32 {
        match event {
            Event::Unknown | Event::Last => 0,
            e => 1 << (e as i32 - 1),
        }
    }
}
