"""A simulated torque-controlled cobot in MuJoCo: base F/T sensor, lidar, scripted contacts.

The model comes from `sim.mjcf` (the same rigid-body dynamics as `RobotModel.rnea`).
Friction is ours, not MuJoCo's: each step applies

    qfrc_applied = τ_cmd − f(q̇)      (f: seed 001 eq. 23, `friction.continuous`)

so the project convention M q̈ + C q̇ + g + f(q̇) = τ + τ_ext holds with τ = τ_cmd, the motor
torque a joint torque sensor measures, and τ_ext = Σ J(p)ᵀ F over the contacts (forces ON the
robot). To keep a steep Coulomb slope stable at 1 ms, the friction is integrated implicitly,
linearised about the current velocity: MuJoCo's joint damping is set to f'(q̇) every step and
added back to qfrc_applied, so the explicit force stays exactly τ_cmd − f(q̇).

Frames: MuJoCo's world is the robot's `base_link` frame; every pose, point, force and lidar
hit is in that frame unless said otherwise.

The 6-axis F/T sensor sits between the base and joint 1 (seed 004). `ft_wrench()` reports
the wrench the robot exerts ON the sensor, at the base origin, in the base frame: at rest it
is the robot's weight (force Σ m_i g, torque Σ r_i × m_i g), and a contact force F at p adds
(F, p × F), the f = f₀ + f_cB + f_Bd of seed 004.

A scenario's people (core/sim/person.py) reach in with a compliant body part
(core/sim/body_parts.py): its contact is a spring of its region's k only at the reduced mass
μ its solref was made for, and the arm's mass at the contact point changes with the pose and
the point, so each step sets the part's solref anew from the arm's effective mass at the
contacts of the step before (`pfl.effective_mass`; the first step of a contact uses the
standard's M/2 + m_L or the previous contact's).
"""
from __future__ import annotations

import mujoco
import numpy as np

from contact_estimation.core.chain import friction
from contact_estimation.core.contact.contact import Contact
from contact_estimation.core.contact.pfl import (BODY_REGIONS, effective_mass, reduced_mass,
                                                 standard_effective_mass)
from contact_estimation.core.per_joint import per_joint
from contact_estimation.core.robot.robot_model import RobotModel
from contact_estimation.core.sim.config import SimConfig
from contact_estimation.core.sim.body_parts import compliant_part, contact_solref
from contact_estimation.core.sim.mjcf import OBSTACLE_PREFIX, ROBOT_PREFIX, build_mjcf
from contact_estimation.core.sim.person import PERSON_PREFIX
from contact_estimation.core.sim.scenario import Scenario
from contact_estimation.core.identification.trajectory import TimeScaler

INTEGRATORS = {'implicitfast': mujoco.mjtIntegrator.mjINT_IMPLICITFAST,
               'implicit': mujoco.mjtIntegrator.mjINT_IMPLICIT,
               'euler': mujoco.mjtIntegrator.mjINT_EULER}


class SimulationError(RuntimeError):
    """The physics diverged (MuJoCo found a non-finite acceleration)."""


def _friction_and_slope(v: np.ndarray, g1, g2, g3, g4, g5, g6) -> tuple[np.ndarray, np.ndarray]:
    """f(q̇) of seed 001 eq. 23 (as `friction.continuous`) and ∂f/∂q̇, from one set of tanh
    (d tanh(x)/dx = 1 − tanh²x): the step needs both, at 1 kHz."""
    t2, t3, t5 = np.tanh(g2 * v), np.tanh(g3 * v), np.tanh(g5 * v)
    f = g1 * (t2 - t3) + g4 * t5 + g6 * v
    slope = g1 * (g2 * (1.0 - t2 * t2) - g3 * (1.0 - t3 * t3)) + g4 * g5 * (1.0 - t5 * t5) + g6
    return f, slope


class SimulatedCobot:
    """The robot of `robot` under computed-torque control, following `trajectory` (played back
    through a `TimeScaler`), with the forces and obstacles of `scenario`. With a payload (the
    scenario's, else the config's), `robot` is the model carrying it, for the physics and the
    controller alike.

    `step()` advances one physics step. Afterwards the readings describe the instant `time`
    at which the step's motor torque was applied (the state it started from; the physics has
    been integrated to `time + dt`): `joint_state()`, `ft_wrench()`, `lidar_points()`,
    `true_contacts()`, `true_external_torque()`.
    """

    def __init__(self, robot: RobotModel, trajectory, scenario: Scenario | None = None,
                 config: SimConfig | None = None):
        self.scenario = scenario or Scenario()
        self.config = config = config or SimConfig()
        self.payload = self.scenario.payload or config.payload
        self.robot = robot = self.payload.carried_by(robot)
        if config.integrator not in INTEGRATORS:
            raise ValueError(f'integrator must be one of {sorted(INTEGRATORS)} '
                             f'(RK4 cannot split a step to apply the control)')
        # 6 × n: γ_k of every joint (seed 001 eq. 23: 6 for every joint or 6 per joint)
        self._friction = per_joint('friction', config.friction, robot.n, width=6).T
        if config.motor_current is not None:
            self._torque_per_ampere = config.motor_current.torque_per_ampere(robot.n)
        robot_mass = standard_effective_mass(robot)  # a first guess: each contact sets its own
        parts = [compliant_part(PERSON_PREFIX + person.name, person.region, person.radius,
                                person.position, robot_mass)
                 for person in self.scenario.people]
        self.mjcf = build_mjcf(robot, self.scenario.obstacles + parts, config)
        self.model = mujoco.MjModel.from_xml_string(self.mjcf)
        # Geom of each person's part → its body region (the solref set at each contact).
        self._part_region = {self.model.geom(OBSTACLE_PREFIX + part.name).id: BODY_REGIONS[
            person.region] for part, person in zip(parts, self.scenario.people)}
        self.data = mujoco.MjData(self.model)
        self._sensor_adr = [self.model.sensor(k).adr[0] for k in range(2)]
        # The moving link of each geom (None: the base, an obstacle or the floor).
        link_of = {ROBOT_PREFIX + g.name: robot.model.frames[g.parentFrame].name
                   for g in robot.collision_model.geometryObjects if g.parentJoint > 0}
        self._geom_link = [link_of.get(self.model.geom(g).name)
                           for g in range(self.model.ngeom)]
        self._body_of_link = {link: self.model.body(robot.joint_links[j]).id
                              for link, j in robot.link_joint.items()}
        self.scaler = TimeScaler(trajectory, config.timestep)
        self._kp = config.natural_frequency ** 2
        self._kd = 2 * config.damping_ratio * config.natural_frequency
        limits = robot.effort_limits
        self._effort_limit = np.where(limits > 0, limits, np.inf)
        self._rng = np.random.default_rng(config.noise_seed)
        self._rays = config.lidar.directions()
        self._ray_origin = np.asarray(config.lidar.position, dtype=float)
        self._ray_geoms = np.zeros(len(self._rays), dtype=np.int32)
        self._ray_dist = np.zeros(len(self._rays))

        q0, v0, _ = self.scaler.reference()
        n = robot.n  # the arm's joints come first; a moving obstacle's after
        self.data.qpos[:n], self.data.qvel[:n] = q0, v0
        self.time = 0.0
        self.q = self.v = self.tau = None  # true state and motor torque at `time`
        self._measured = None
        self._applied: list[tuple[str, np.ndarray, np.ndarray]] = []  # (link, p_link, F_base)
        self._bad_qacc = 0

    # -------------------------------------------------------------------- stepping
    @property
    def dt(self) -> float:
        return self.config.timestep

    def friction(self, v: np.ndarray) -> np.ndarray:
        """f(q̇) of every joint, seed 001 eq. 23 (`v`: n, or k × n for k velocity vectors)."""
        return friction.continuous(v, *self._friction)

    def set_time_scaling(self, scaling: float) -> float:
        """f_S of seed 003 eq. 8 for the reference playback; returns the (clipped) value used."""
        return self.scaler.set_scaling(scaling)

    def step(self) -> None:
        m, d, cfg = self.model, self.data, self.config
        n = self.robot.n
        q, v = d.qpos[:n].copy(), d.qvel[:n].copy()
        reference = self.scaler.reference()
        (f, f_ref), (slope, _) = _friction_and_slope(np.stack([v, reference[1]]), *self._friction)
        # Implicit friction: damping f'(q̇) here, +f'(q̇)q̇ in qfrc_applied (see module doc).
        m.dof_damping[:n] = np.maximum(slope, 0.0)
        self._fit_part_contacts(q)
        mujoco.mj_step1(m, d)

        noise = self._rng.standard_normal((3, self.robot.n))
        q_meas = q + cfg.position_noise * noise[0]
        v_meas = v + cfg.velocity_noise * noise[1]
        tau = self._control(q_meas, v_meas, reference, f_ref)
        d.qfrc_applied[:n] = tau - f + m.dof_damping[:n] * v
        self.time = d.time
        self._apply_forces(q)
        mujoco.mj_step2(m, d)
        self.scaler.advance()

        bad = d.warning[mujoco.mjtWarning.mjWARN_BADQACC].number
        if bad != self._bad_qacc:
            self._bad_qacc = bad
            raise SimulationError(f'the physics diverged at t = {self.time:.3f} s '
                                  f'(MuJoCo reset the state)')
        self.q, self.v, self.tau = q, v, tau
        if cfg.motor_current is None:
            effort = tau + cfg.effort_noise * noise[2]
        else:
            effort = cfg.motor_current.measured_torque(tau, self._torque_per_ampere, noise[2])
        self._measured = (q_meas, v_meas, effort)

    def _fit_part_contacts(self, q: np.ndarray) -> None:
        """Each person's part touched in the step before: its solref for the arm's effective
        mass at that contact, along its normal (module doc)."""
        d = self.data
        for i in range(d.ncon if self._part_region else 0):
            contact = d.contact[i]
            for part, other in ((contact.geom1, contact.geom2), (contact.geom2, contact.geom1)):
                region, link = self._part_region.get(part), self._geom_link[other]
                if region is not None and link is not None:
                    robot_mass = effective_mass(self.robot, q, link, contact.pos,
                                                contact.frame[:3])
                    self.model.geom_solref[part] = contact_solref(
                        region.stiffness, reduced_mass(region.effective_mass, robot_mass))

    def people_keypoints(self) -> list[np.ndarray]:
        """The COCO-17 keypoints (17 × 3, base frame) of each of the scenario's people at
        `time` (they stand still)."""
        return [person.keypoints() for person in self.scenario.people]

    def _control(self, q: np.ndarray, v: np.ndarray, reference, friction_ref) -> np.ndarray:
        """Computed torque on the measured state and the reference (q_d, q̇_d, q̈_d):
        τ = rnea(q, q̇, q̈_d + Kp e + Kd ė) + c f(q̇_d), saturated at the effort limits. The
        friction is fed forward at the reference velocity (no chatter from velocity noise).
        It knows nothing of the external forces."""
        q_ref, v_ref, a_ref = reference
        a_cmd = a_ref + self._kp * (q_ref - q) + self._kd * (v_ref - v)
        tau = self.robot.rnea(q, v, a_cmd) + self.config.friction_compensation * friction_ref
        return np.clip(tau, -self._effort_limit, self._effort_limit)

    def _apply_forces(self, q: np.ndarray) -> None:
        """Scripted point forces at time `self.time`, as Cartesian forces on their bodies."""
        d = self.data
        d.xfrc_applied[:] = 0.0
        self._applied = []
        for item in self.scenario.forces:
            share = item.scale(self.time)
            if share == 0.0:
                continue
            rotation, origin = self.robot.link_pose(q, item.link)
            force = share * (rotation @ item.force if item.frame == 'link' else item.force)
            point = rotation @ item.point + origin
            body = self._body_of_link[item.link]
            d.xfrc_applied[body, :3] += force
            d.xfrc_applied[body, 3:] += np.cross(point - d.xipos[body], force)
            self._applied.append((item.link, item.point.copy(), force))

    # -------------------------------------------------------------------- readings
    def joint_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Measured (q, q̇, τ) at `time`: the motor torque τ_cmd plus sensor noise, or as the
        driver computes it from the motor current (`SimConfig.motor_current`)."""
        return self._measured

    def ft_wrench(self) -> tuple[np.ndarray, np.ndarray]:
        """(force, torque) the robot exerts on the base F/T sensor, at the base origin, base
        frame; one noisy reading per call."""
        data = self.data.sensordata
        force_on_robot = data[self._sensor_adr[0]:self._sensor_adr[0] + 3]
        torque_on_robot = data[self._sensor_adr[1]:self._sensor_adr[1] + 3]
        noise = self._rng.standard_normal(6)
        return (-force_on_robot + self.config.ft_force_noise * noise[:3],
                -torque_on_robot + self.config.ft_torque_noise * noise[3:])

    def lidar_points(self) -> np.ndarray:
        """Hit points (N × 3, base frame) of one lidar scan at `time`, with range noise."""
        mujoco.mj_multiRay(self.model, self.data, self._ray_origin, self._rays.ravel(), None, 1,
                           -1, self._ray_geoms, self._ray_dist, len(self._rays),
                           self.config.lidar.max_range)
        hit = self._ray_dist >= 0
        noise = self.config.lidar.range_noise * self._rng.standard_normal(hit.sum())
        ranges = self._ray_dist[hit] + noise
        return self._ray_origin + ranges[:, None] * self._rays[hit]

    def _contacts_base(self) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """(link, point in link frame, force on the robot in base frame) of every contact."""
        contacts = list(self._applied)
        d = self.data
        result = np.zeros(6)
        for i in range(d.ncon):
            contact = d.contact[i]
            link1, link2 = self._geom_link[contact.geom1], self._geom_link[contact.geom2]
            if (link1 is None) == (link2 is None) or contact.efc_address < 0:
                continue
            mujoco.mj_contactForce(self.model, d, i, result)
            # Contact frame rows: normal (from geom1 to geom2), then tangents; the force is
            # the one geom1 exerts on geom2.
            force = contact.frame.reshape(3, 3).T @ result[:3]
            if not np.any(force):
                continue
            link = link2 or link1
            # On the robot; its surface lies dist/2 (negative: penetration) from contact.pos
            # along the normal, towards the robot.
            force, offset = (force, contact.dist / 2) if link2 else (-force, -contact.dist / 2)
            # contact.pos is midway between the two surfaces. Slid along the force's line of
            # action onto the plane of the link's surface there, the point has the same
            # moment (τ_ext = J(p)ᵀF and the F/T wrench unchanged) and lies on the link.
            normal = contact.frame[:3]
            point = contact.pos + offset / (force @ normal) * force
            rotation, origin = self.robot.link_pose(self.q, link)
            contacts.append((link, rotation.T @ (point - origin), force))
        return contacts

    def true_contacts(self) -> list[Contact]:
        """Contacts at `time`, one per link: the total force on that link and its point of
        application (several MuJoCo contact points on a link are merged at their
        force-weighted mean). Point and force in the link frame."""
        per_link: dict[str, list] = {}
        for link, point, force in self._contacts_base():
            per_link.setdefault(link, []).append((point, force))
        contacts = []
        for link, items in per_link.items():
            points = np.array([p for p, _ in items])
            forces = np.array([f for _, f in items])
            weights = np.linalg.norm(forces, axis=1)
            rotation, _ = self.robot.link_pose(self.q, link)
            contacts.append(Contact(link, weights @ points / weights.sum(),
                                    rotation.T @ forces.sum(axis=0)))
        return contacts

    def true_external_torque(self) -> np.ndarray:
        """τ_ext = Σ J(p)ᵀ F over the contacts at `time` (forces on the robot)."""
        tau = np.zeros(self.robot.n)
        for link, point, force in self._contacts_base():
            tau += self.robot.point_jacobian(self.q, link, point).T @ force
        return tau
