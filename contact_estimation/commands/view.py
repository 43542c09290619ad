"""`contact-estimation view`: the running suite live in Foxglove, over its WebSocket protocol
(foxglove-sdk; no ROS bridge, no ROS install on the laptop that watches).

Open Foxglove → Open connection → Foxglove WebSocket → ws://localhost:8765, and the layout
config/foxglove_layout.json. The view runs in a process of its own at normal priority and
takes the suite's topics at a display rate (ros/view_node.py), so that it never costs a stop;
`--mcap FILE` also records what it shows.
"""
from __future__ import annotations

import argparse
import signal
import sys

import foxglove
import foxglove.layouts as fl
from rcl_interfaces.srv import GetParameters
from rclpy.parameter import parameter_value_to_python

from contact_estimation import manifest
from contact_estimation.core.chain.detector import DetectorConfig, DetectorSettings
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.nodes.collision_detector import PARAMETERS as DETECTOR_PARAMETERS
from contact_estimation.ros.node_main import run
from contact_estimation.ros.view_node import DEFAULT_RATE, SuiteView, ViewChannels

DEFAULT_PORT = 8765
PROCESS = 'contact_estimation_view'  # its process's name under `up --view` and the demo
# Frames a slow client may have waiting; beyond, the server drops its oldest (never queues).
CLIENT_BACKLOG = 64


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog='contact-estimation view', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--port', type=int, default=DEFAULT_PORT,
                        help=f'WebSocket port (default {DEFAULT_PORT}; 0: any free one)')
    parser.add_argument('--host', default='127.0.0.1',
                        help='address to serve on (default 127.0.0.1, this machine only; '
                             '0.0.0.0: every network the PC is on)')
    parser.add_argument('--namespace', default='', metavar='NS',
                        help="the suite's ROS namespace (as given to `up --namespace`)")
    parser.add_argument('--robot', metavar='NAME|URDF',
                        help="the suite's robot (default: config/robot.yaml, then --config)")
    parser.add_argument('--config', action='append', default=[], metavar='FILE',
                        help="the suite's parameter files (for its robot)")
    parser.add_argument('--rate', type=float, default=DEFAULT_RATE,
                        help=f'frames a second (default {DEFAULT_RATE:g})')
    parser.add_argument('--mcap', metavar='FILE',
                        help='also record what the view shows to FILE (an MCAP Foxglove opens)')
    parser.add_argument('--write-layout', metavar='FILE',
                        help='write the Foxglove layout of the view to FILE and exit (the '
                             'package ships it as config/foxglove_layout.json)')
    args = parser.parse_args(argv)
    # `up --view` starts this process with SIGINT held back (launcher.ctrl_c_held), as the
    # nodes; without this its Ctrl-C never came and `up` had to kill it after STOP_GRACE.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if args.write_layout:
        with open(args.write_layout, 'w', encoding='utf-8') as f:
            f.write(layout_json())
        return 0
    if not 1.0 <= args.rate <= 60.0:
        parser.error('--rate: between 1 and 60 frames a second')
    robot = suite_robot(args.config, args.robot)
    channels = ViewChannels()
    recording = foxglove.open_mcap(args.mcap, allow_overwrite=True) if args.mcap else None
    server = foxglove.start_server(name=f'contact_estimation {args.namespace}'.strip(),
                                   host=args.host, port=args.port,
                                   message_backlog_size=CLIENT_BACKLOG)
    print(f'[contact-estimation] view of {robot.name or "the robot"} on '
          f'ws://{args.host}:{server.port} (Foxglove: Open connection → Foxglove WebSocket)',
          flush=True)

    def make_view() -> SuiteView:
        view = SuiteView(robot, channels, args.namespace, args.rate)
        ask_thresholds(view, args.namespace)
        return view

    try:
        return run(make_view, [sys.argv[0]])
    finally:
        server.stop()
        if recording is not None:
            recording.close()


def command(port: str, namespace: str, config: list[str], mcap: str | None = None
            ) -> list[str]:
    """The view's process, as `up --view` and the demo start it beside the suite."""
    return [sys.executable, '-m', 'contact_estimation', 'view', '--port', port,
            '--namespace', namespace, *(a for f in config for a in ('--config', f)),
            *(('--mcap', mcap) if mcap else ())]


def suite_robot(config: list[str], robot: str | None) -> RobotModel:
    """The robot the suite's nodes load (manifest.suite_robot), or `robot`."""
    values = manifest.suite_robot([manifest.robot_parameters_path(), *config])
    source = robot or values.get('robot_description') or values.get('robot', '')
    return RobotModel.load(source, values.get('base_link', ''), values.get('tip_link', ''))


def ask_thresholds(view: SuiteView, namespace: str) -> None:
    """Ask the collision detector for its threshold parameters; once they come, the view
    shows ψ beside τ_ext (the detector's own rule at each sample's q̇)."""
    names = list(DETECTOR_PARAMETERS.feeding(DetectorSettings))
    service = manifest.resolve('collision_detector/get_parameters', namespace)
    client = view.create_client(GetParameters, service)

    def asked() -> None:
        if client.service_is_ready():
            view.destroy_timer(timer)
            client.call_async(GetParameters.Request(names=names)).add_done_callback(answered)

    def answered(future) -> None:
        values = {n: parameter_value_to_python(v) for n, v in zip(names, future.result().values)}
        try:
            config = DetectorConfig.build(view.robot.joint_names, **DETECTOR_PARAMETERS.fields(
                DetectorSettings, values))
        except (TypeError, ValueError) as err:
            view.get_logger().warning(f'no ψ in the view: the detector\'s parameters: {err}')
            return
        view.thresholds = config.thresholds

    timer = view.create_timer(0.5, asked)


def layout_json(joints: int = 7) -> str:
    """The view's Foxglove layout: the 3D panel (the arm, contacts, people) beside the stop,
    the time scaling, |τ_ext|/ψ per joint and the collision events."""
    ratio = [fl.PlotSeries(value=f'/view/torque.ratio[{i}]', label=f'joint {i + 1}')
             for i in range(joints)]
    stop = fl.StateTransitionsPanel(title='stops', config=fl.StateTransitionsConfig(paths=[
        fl.StateTransitionsSeries(value='/view/stop.stop', label='stop'),
        fl.StateTransitionsSeries(value='/view/stop.proximity_stop', label='proximity stop')]))
    scaling = fl.PlotPanel(title='f_S and speed scale', config=fl.PlotConfig(paths=[
        fl.PlotSeries(value='/view/stop.time_scaling', label='f_S (time scaling)'),
        fl.PlotSeries(value='/view/stop.speed_scale', label='proximity speed scale')]))
    torque = fl.PlotPanel(title='|τ_ext| / ψ (1: the threshold)',
                          config=fl.PlotConfig(paths=ratio, show_legend=True))
    events = fl.RawMessagesPanel(title='collision events (class, evidence)',
                                 config=fl.RawMessagesConfig(topic_path='/view/collision_events',
                                                             expansion='all'))
    scene = fl.ThreeDeePanel(title='arm, contacts, people', config=fl.ThreeDeeConfig(
        topics={'/view/scene': fl.BaseRendererSceneUpdateTopicSettings(
            visible=True)}))
    column = fl.SplitContainer(direction='column', items=[
        fl.SplitItem(content=stop, proportion=0.8), fl.SplitItem(content=scaling),
        fl.SplitItem(content=torque, proportion=1.5), fl.SplitItem(content=events)])
    return fl.Layout(content=fl.SplitContainer(direction='row', items=[
        fl.SplitItem(content=scene, proportion=1.4), fl.SplitItem(content=column)])).to_json()
