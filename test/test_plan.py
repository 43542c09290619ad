"""Composed mode as data: manifest.plan says what each process of nodes.yaml does with the
topics of its nodes (composed.build wires them by it, `contact-estimation parameters --plan`
prints it). Checked here as a value, with no process started."""
from __future__ import annotations

import yaml

from contact_estimation import manifest
from contact_estimation.commands.parameters import plan_text

SHARED = manifest.shared_samples()
PLAN = {p.process: p for p in manifest.plan()}


def test_every_composed_process_has_a_plan_in_nodes_yaml_order():
    assert tuple(PLAN) == tuple(p.name for p in manifest.composed())


def test_one_process_writes_the_shared_samples_and_it_is_where_their_source_is():
    writers = [p for p in PLAN.values() if p.writes_ring]
    assert [p.process for p in writers] == [manifest.process_of('residual_node').name]
    assert SHARED.source in writers[0].handed_over and not writers[0].reads_ring


def test_each_shared_topic_has_one_publisher_process():
    for topic in SHARED.topics:
        publishers = [p.process for p in PLAN.values() if topic in p.publishes]
        assert publishers == [manifest.publishing_process().name], topic
        elsewhere = [p.process for p in PLAN.values() if topic in p.published_elsewhere]
        assert elsewhere == [p.process for p in PLAN.values() if p.writes_ring], topic


def test_every_reader_of_a_shared_topic_outside_the_writer_reads_it_from_shared_memory():
    for plan in PLAN.values():
        if plan.writes_ring:
            continue
        read_here = manifest.read_topics(plan.nodes) & set(SHARED.topics)
        assert read_here <= set(plan.reads_ring), plan.process
        assert read_here <= set(plan.handed_over), plan.process


def test_what_comes_from_outside_the_suite_is_taken_where_it_is_read():
    assert PLAN['contact_estimation_chain'].from_outside == (
        'joint_states', 'wrist_ft_sensor/wrench')
    assert 'joint_states' not in {t for p in PLAN.values() if not p.writes_ring
                                  for t in p.from_outside}
    assert PLAN['contact_estimation_proximity'].from_outside == ('human/skeleton',
                                                                 'lidar/points')


def test_the_replay_in_one_process_hands_everything_over_and_uses_no_shared_memory():
    replay = manifest.process_plan(manifest.composed_nodes(), shared_memory=False)
    assert not replay.writes_ring and not replay.reads_ring and not replay.published_elsewhere
    assert set(SHARED.topics) <= set(replay.handed_over) <= set(replay.publishes)


def test_the_printed_plan_is_the_plan():
    printed = yaml.safe_load(plan_text())
    assert list(printed) == list(PLAN)
    for name, plan in PLAN.items():
        assert printed[name]['writes_ring'] == plan.writes_ring
        assert tuple(printed[name]['reads_ring']) == plan.reads_ring
        assert tuple(printed[name]['publishes']) == plan.publishes
