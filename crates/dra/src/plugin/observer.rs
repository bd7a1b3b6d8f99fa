//! Who is told when a driver's calls start going to another plugin ([`PluginObserver`]):
//! the health monitor watches the newest plugin's health stream.

use super::client::DraPluginClient;

/// Told, after each registration and deregistration, which plugin is now the newest for a
/// driver (`None`: the driver has none left). Called with the registry's bookkeeping lock
/// held: it must not block (spawning a task is fine) and must not call back into the
/// registry.
pub trait PluginObserver: Send + Sync + std::fmt::Debug {
    /// `driver`'s newest registration is now `newest`.
    fn newest_changed(&self, driver: &str, newest: Option<&DraPluginClient>);
}
