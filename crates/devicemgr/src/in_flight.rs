//! A pod's device admission in flight, in the core state: the devices reserved for its
//! containers in a decision (realized after it by the plugins' `Allocate`), the
//! `GetPreferredAllocation` questions a decision could not answer, and the plugins'
//! answers for the decision taken again.
//!
//! Reserving in the decision and calling the plugins after it keeps every decision on the
//! node's state as it is (no other decision can run between a pod's device choice and
//! its memory or CPU choice), while a slow plugin delays only its own pods.

use std::collections::BTreeSet;

use crate::state::{AdmissionInFlight, Answer, DeviceState, PreferredRequest, Reservation};

/// How often one container's question about one resource is put to its plugin before the
/// last answer is taken for a changed question (filtered to what is available then, as
/// every answer is): other decisions between the asking and the deciding may change the
/// question each time, and the pod must still be decided. Such a decision is logged and
/// counted ([`DeviceManager::stale_answers_taken`](crate::DeviceManager::stale_answers_taken)):
/// its devices are the plugin's preference for an earlier state, not necessarily what one
/// admission at a time would have given.
pub const MAX_QUESTIONS_PER_RESOURCE: u32 = 16;

impl DeviceState {
    fn in_flight(&mut self, pod_uid: &str) -> &mut AdmissionInFlight {
        self.in_flight.entry(pod_uid.to_owned()).or_default()
    }

    /// A decision of the pod starts reserving: remember the devices left for reuse as they
    /// are, unless this decision already did.
    pub(crate) fn save_reuse(&mut self, pod_uid: &str) {
        if self
            .in_flight
            .get(pod_uid)
            .is_some_and(|a| a.reuse_before.is_some())
        {
            return;
        }
        let before = self.devices_to_reuse.clone();
        self.in_flight(pod_uid).reuse_before = Some(before);
    }

    /// Keep `reservation` for `container` of the pod until it is realized or cancelled.
    pub(crate) fn hold(&mut self, pod_uid: &str, container: &str, reservation: Reservation) {
        self.in_flight(pod_uid)
            .reserved
            .push((container.to_owned(), reservation));
    }

    /// The devices reserved for `container` of the pod, per resource.
    pub(crate) fn held_for(
        &self,
        pod_uid: &str,
        container: &str,
    ) -> impl Iterator<Item = (&String, &Vec<String>)> {
        self.in_flight
            .get(pod_uid)
            .into_iter()
            .flat_map(|admission| &admission.reserved)
            .filter(move |(c, _)| c == container)
            .map(|(_, r)| (&r.resource, &r.devices))
    }

    /// Note a question for the pod's plugins (asked after the decision).
    pub(crate) fn put_question(&mut self, pod_uid: &str, container: &str, ask: PreferredRequest) {
        self.in_flight(pod_uid)
            .questions
            .push((container.to_owned(), ask));
    }

    /// The pod's questions not asked yet (taken: each is asked once).
    pub(crate) fn take_questions(&mut self, pod_uid: &str) -> Vec<(String, PreferredRequest)> {
        self.in_flight
            .get_mut(pod_uid)
            .map(|a| std::mem::take(&mut a.questions))
            .unwrap_or_default()
    }

    /// Record the plugin's answer to `ask` for `container` of the pod.
    pub(crate) fn put_answer(
        &mut self,
        pod_uid: &str,
        container: &str,
        ask: PreferredRequest,
        devices: BTreeSet<String>,
    ) {
        let key = (container.to_owned(), ask.resource.clone());
        let answers = &mut self.in_flight(pod_uid).answers;
        let asked = answers.get(&key).map_or(0, |a| a.asked) + 1;
        answers.insert(
            key,
            Answer {
                question: ask,
                devices,
                asked,
            },
        );
    }

    /// The answer to use for `ask`: the plugin's answer to this very question
    /// (`Some((answer, true))`), or, once the question was put
    /// [`MAX_QUESTIONS_PER_RESOURCE`] times, its last answer (`Some((answer, false))`).
    pub(crate) fn answer_to(
        &self,
        pod_uid: &str,
        container: &str,
        ask: &PreferredRequest,
    ) -> Option<(BTreeSet<String>, bool)> {
        let answer = self
            .in_flight
            .get(pod_uid)?
            .answers
            .get(&(container.to_owned(), ask.resource.clone()))?;
        let exact = answer.question == *ask;
        (exact || answer.asked >= MAX_QUESTIONS_PER_RESOURCE)
            .then(|| (answer.devices.clone(), exact))
    }

    /// The pod's reservations, taken to be realized (they stay counted as allocated until
    /// committed or released); the decision stands, so what it left for reuse stays.
    pub(crate) fn take_reserved(&mut self, pod_uid: &str) -> Vec<(String, Reservation)> {
        self.in_flight
            .get_mut(pod_uid)
            .map(|a| {
                a.reuse_before = None;
                std::mem::take(&mut a.reserved)
            })
            .unwrap_or_default()
    }

    /// Give back what the pod's decision reserved and put back the devices left for reuse
    /// as they were before it; its questions and the answers stay for the decision taken
    /// again.
    pub(crate) fn cancel_reserved(&mut self, pod_uid: &str) {
        let Some(admission) = self.in_flight.get_mut(pod_uid) else {
            return;
        };
        if let Some(before) = admission.reuse_before.take() {
            self.devices_to_reuse = before;
        }
        let Some(admission) = self.in_flight.get_mut(pod_uid) else {
            return;
        };
        let reserved = std::mem::take(&mut admission.reserved);
        for (_, reservation) in &reserved {
            self.reservations.remove(&reservation.id);
        }
        if !reserved.is_empty() {
            self.regenerate_allocated();
        }
    }

    /// End the pod's admission: cancel what it reserved and forget its answers.
    pub(crate) fn end_admission(&mut self, pod_uid: &str) {
        self.cancel_reserved(pod_uid);
        self.in_flight.remove(pod_uid);
    }

    /// Whether the pod's decision reserved devices not yet realized.
    pub fn has_reservations(&self, pod_uid: &str) -> bool {
        self.in_flight
            .get(pod_uid)
            .is_some_and(|a| !a.reserved.is_empty())
    }

    /// Pods with an admission in flight.
    pub fn admissions_in_flight(&self) -> usize {
        self.in_flight.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(available: &[&str]) -> PreferredRequest {
        PreferredRequest {
            resource: "example.com/gpu".to_owned(),
            available: available.iter().map(|s| (*s).to_owned()).collect(),
            must_include: Vec::new(),
            size: 1,
        }
    }

    fn answer(id: &str) -> BTreeSet<String> {
        BTreeSet::from([id.to_owned()])
    }

    #[test]
    fn an_answer_serves_its_own_question_until_asked_too_often() {
        let mut state = DeviceState::new(vec![0]);
        let (first, changed) = (ask(&["a", "b"]), ask(&["b", "c"]));
        state.put_answer("p", "c0", first.clone(), answer("b"));
        assert_eq!(
            state.answer_to("p", "c0", &first),
            Some((answer("b"), true))
        );
        // Another container, pod or question: not answered.
        assert_eq!(state.answer_to("p", "c1", &first), None);
        assert_eq!(state.answer_to("q", "c0", &first), None);
        assert_eq!(state.answer_to("p", "c0", &changed), None);
        // The question changed each time: after the last allowed asking, the last answer
        // serves any question about the resource.
        for round in 2..=MAX_QUESTIONS_PER_RESOURCE {
            state.put_answer("p", "c0", ask(&["x", &round.to_string()]), answer("c"));
        }
        assert_eq!(
            state.answer_to("p", "c0", &changed),
            Some((answer("c"), false))
        );
        state.end_admission("p");
        assert_eq!(state.answer_to("p", "c0", &changed), None);
        assert_eq!(state.admissions_in_flight(), 0);
    }

    #[test]
    fn cancelled_reservations_free_their_devices_and_keep_the_questions() {
        let mut state = DeviceState::new(vec![0]);
        let reservation = state.reserve("example.com/gpu", &["a".to_owned()]);
        state.hold("p", "c0", reservation);
        state.put_question("p", "c1", ask(&["b"]));
        assert_eq!(state.allocated_devices("example.com/gpu").len(), 1);
        assert_eq!(state.held_for("p", "c0").count(), 1);
        state.cancel_reserved("p");
        assert!(state.allocated_devices("example.com/gpu").is_empty());
        assert_eq!(state.reservations_in_flight(), 0);
        assert_eq!(state.take_questions("p").len(), 1);
        assert!(
            state.take_questions("p").is_empty(),
            "each question is asked once"
        );
    }
}
