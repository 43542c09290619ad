"""A reading process's end of the shared-memory joint samples (core/chain/sample_ring.py): it
takes what the chain's process wrote and hands each sample to the nodes of this process that
read the shared topics; in their publisher (nodes.yaml `shared_samples: published_by`, the
relay process; manifest.process_plan) it also publishes those topics for anyone who
subscribes.

The chain's process writes every sample the residual node makes (q, q̇, τ, τ_ext, stamp) and
publishes nothing at 1 kHz (issue 26): receiving, building and sending those messages would
take the stop's CPU, and a user plotting the residual would slow the stop. Here one timer
every `PERIOD` takes the new samples in a batch (never a timer per sample), in stamp order,
so the estimators see exactly the samples a replay hands them; a reader that falls more
than the ring's capacity behind counts what it lost on /diagnostics (`samples_lost`).

A node that decides at its own pace on the newest sample (the proximity monitor's check) has
a `catch_up` attribute: the feed sets it to `take`, and the node calls it before it decides,
so that a late wake decides on the samples that came meanwhile, whichever of its timers the
executor runs first (issue 35). A process of such nodes alone (`SuiteNode.PACES_ITSELF`: the
proximity process) gets no timer from its feed at all: every take is one its node asks for,
on the samples a take every `PERIOD` would have handed it by then, so 200 wakes a second
fewer (issue 35: the executor's dispatch, not the take, was most of their cost).

At rest in the relay process (nobody subscribes to the streams it publishes, no receiver in
the process), a take builds nothing: it keeps the newest sample for a subscriber who comes
and skips the others (not lost), every `IDLE_PERIOD`; a subscriber's match (the publisher's
event, or the recount of ros/handover.py `Output`) brings the timer back to `PERIOD` at once,
from the newest sample (`_subscriber_came`).

One wake for all of a process's inputs (issue 35): each take first takes the polled
subscriptions of its nodes (the F/T readings, ros/suite_node.py), which then have no timer
of their own, so a reading and the joint sample of its stamp meet in the same wake, as a
replay hands them over, instead of one waiting for the other's timer. A process of
estimators rests between takes (`REST_PERIOD`) while no contact lasts. While a node of the
process says a contact lasts (`contact_lasts`: the localizer's gate is open, the F/T
estimator has a contact or feels one nearing), the feed wakes every `CONTACT_PERIOD`
instead, from that take on (not a rest later), so that the estimates of a contact wait
less; it rests again when none does, or when no sample came for `QUIET` s (the driver
stopped during a contact). A collision event (nodes.yaml `shared_samples: woken_by`, the
detector's, a DDS message the chain sends anyway: nothing is added to the stop's path)
makes the feed take at once and wake every `CONTACT_PERIOD` for `QUIET` s: the localizer's
gate opens after eq. 7 fires, and a contact's first estimate no longer waits up to a rest
for the take that sees it. A contact only the F/T sensor sees waits up to `REST_PERIOD`
for the take that feels it nearing.

Where several receivers share the samples (the estimation process: the F/T estimator's
joint states and residuals, the localizer's residuals), a batch goes to them sample by
sample, each sample to every receiver before the next one, as a replay hands them over:
the estimators read each other's outputs (the localizer the latest base wrench, the F/T
estimator the localizer's latest point), so each estimate uses what the replay's does, and
an early sample's estimate never waits for the estimates of the later samples of its batch
(issue 35: the F/T estimator's first estimate waited for the localizer's, 5-16 ms). A lone
receiver (the proximity monitor) takes the whole batch at once.
"""
from __future__ import annotations

from builtin_interfaces.msg import Time
from rclpy.clock import Clock, ClockType
from diagnostic_msgs.msg import DiagnosticArray
from sensor_msgs.msg import JointState

from contact_estimation.core.chain.sample_ring import SampleRingReader
from contact_estimation.ros.handover import Handover, Output
from contact_estimation.ros.joint_states import JointStateWriter
from contact_estimation.ros.qos import PIPELINE_QOS, STOP_QOS
from contact_estimation.ros.suite_node import SuiteNode

PERIOD = 0.005  # s between takes: a sample waits at most this (plus the estimators' work); one
# wake per sample at 1 kHz cost the estimation process more than its estimates (issue 35)
REST_PERIOD = 0.01  # s between takes of a process of estimators while no contact lasts: half
# the wakes of PERIOD (the wake, not its samples, was 30 % of the estimation process's CPU,
# issue 35); a collision event or a contact its estimators see wakes it at once
CONTACT_PERIOD = 0.001  # s between takes while a contact lasts: the estimates wait less
QUIET = 0.1  # s without a sample after which a contact no longer counts (the driver stopped)
IDLE_PERIOD = 0.25  # s between takes while nobody takes the samples (the relay, no subscriber):
# well within the ring's capacity and the reader's IDLE_TIME; a subscriber's match wakes it


class SampleFeed:
    """For `nodes` (the nodes of this process; the first's timer and diagnostics it uses):
    the ring named `name`, its samples handed to the receivers of `topics` in `handover`
    and, when `publishes` (this process is their publisher), published on them (effort = τ on
    the joint-state topic, τ_ext on the residual one); and the nodes' polled subscriptions."""

    def __init__(self, nodes: list[SuiteNode], handover: Handover, name: str,
                 topics: tuple[str, ...], residual_topic: str, publishes: bool,
                 woken_by: str):
        self._node = node = nodes[0]
        self._nodes = nodes
        self._polling = [n for n in nodes if n.polled_subscriptions]
        for polled in self._polling:
            polled.poll_elsewhere()
        self._reader = SampleRingReader(name, lambda sec, nanosec: Time(sec=sec,
                                                                        nanosec=nanosec))
        self._writer = JointStateWriter(list(node.robot.joint_names))
        self._outputs = [(Output(node, topic, JointState, PIPELINE_QOS,
                                 handover.receivers(topic) or [], only_when_listened=True,
                                 published_elsewhere=not publishes),
                          topic == residual_topic) for topic in topics]
        self._receivers = [receive for output, _ in self._outputs
                           for receive in output.receivers]
        self._reported_lost = 0
        self._latest: list = []  # the last sample taken
        self._sample_came = -QUIET  # s, steady: when a take last found samples
        self._woken = -QUIET  # s, steady: when a collision event last came
        # s between the timer's wakes while no contact lasts: estimators rest longer than a
        # publisher whose subscriber (the simulated cobot's lockstep) waits for each sample
        self._rest_period = REST_PERIOD if self._receivers else PERIOD
        self._period = self._rest_period  # s between the timer's wakes
        self._timer = None
        if not publishes and not self._polling and all(n.PACES_ITSELF for n in nodes):
            return  # its nodes take when they decide (`catch_up`): no wake of its own
        # On the steady clock: the samples come at the machine's pace, whatever /clock does
        # (the simulated cobot's lockstep waits for the joint states published here).
        self._timer = node.create_timer(self._period, self.take,
                                        clock=Clock(clock_type=ClockType.STEADY_TIME))
        node.create_subscription(DiagnosticArray, woken_by, self._event, STOP_QOS, raw=True)
        for output, _ in self._outputs:
            output.on_joined = self._subscriber_came

    def _event(self, _message: bytes) -> None:
        """A collision event: take now, and often while the contact may last."""
        self._woken = self._node.steady()
        self.take()

    def take(self) -> None:
        """Hand over the messages of the polled subscriptions, then (and publish, in their
        publisher) the samples written since the last take; wake sooner while a contact
        lasts."""
        for polled in self._polling:
            polled.take_polled()
        if self._timer is not None and not self._receivers and not any(
                output.listened for output, _ in self._outputs):
            # Nobody takes them (the relay, no subscriber): the newest kept for one who comes.
            self._latest = self._reader.newest() or self._latest
            self._wake_every(IDLE_PERIOD)
            return
        samples = self._reader.take()
        # Each sample to every receiver before the next; a lone receiver takes the batch.
        batches = ([samples] if len(self._receivers) == 1 else
                   [(sample,) for sample in samples]) if samples else []
        for batch in batches:
            for receive in self._receivers:
                receive(batch)
        for output, residual in self._outputs:
            listened = output.listened
            # A subscriber that has just come gets the latest sample at once, even when
            # others listened already (the demo's recorder): the simulated cobot's lockstep
            # waits for the sample it sent last, which may have been taken before its
            # subscription was seen.
            sent = (samples or self._latest) if output.joined() else samples
            if listened:
                for sample in sent:
                    output.publisher.publish(self._writer.write(
                        sample.stamp, sample.frame_id, sample.q, sample.v,
                        sample.tau_ext if residual else sample.tau))
        self._latest = samples[-1:] or self._latest
        now = self._node.steady()
        if samples:
            self._sample_came = now
        in_contact = (now - self._woken < QUIET
                      or (now - self._sample_came < QUIET
                          and any(n.contact_lasts for n in self._nodes)))
        self._wake_every(CONTACT_PERIOD if in_contact else self._rest_period)
        if self._reader.lost != self._reported_lost:
            self._node.problems.report('samples_lost', f'{self._reader.lost - self._reported_lost} '
                                       'joint sample(s) overwritten in shared memory before this '
                                       'process took them: it is behind the chain')
            self._reported_lost = self._reader.lost
            self._node.problems.values['samples_lost'] = str(self._reader.lost)

    def _subscriber_came(self) -> None:
        """A subscriber matched: at rest, wake every PERIOD from now, the samples since the
        last take skipped but the newest, as a take every PERIOD would have left them (a
        burst of up to IDLE_PERIOD's samples, more than a reliable publisher keeps, left the
        new subscriber waiting seconds for the middleware to repair what it had missed)."""
        if self._period == IDLE_PERIOD:
            self._latest = self._reader.newest() or self._latest
            self._wake_every(PERIOD)

    def _wake_every(self, period: float) -> None:
        """The timer's period from now on; a shorter one from now (the next wake a `period`
        from now, not at the end of the longer one)."""
        if self._timer is None or period == self._period:
            return
        self._timer.timer_period_ns = round(1e9 * period)
        if period < self._period:
            self._timer.reset()
        self._period = period

    def close(self) -> None:
        self._reader.close()
