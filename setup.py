"""ament_python package; also installs with pip (`pip install -e .[ros]`)."""
from glob import glob

from setuptools import find_packages, setup

PACKAGE = 'contact_estimation'

# One console script per node, named as the launch file and the manifest name them; each
# starts its node through contact_estimation/nodes/__main__.py, which reads its own name.
NODE_SCRIPTS = [
    'joint_state_listener',
    'residual_node',
    'collision_detector',
    'ft_contact_estimator',
    'contact_localizer',
    'proximity_monitor',
    'sample_relay',
    'sim_cobot',
]

# Composed mode (nodes.yaml `composed`): the chain's, the estimators', the proximity
# monitor's and the relay's process (the same entry).
COMPOSED_SCRIPTS = ['contact_estimation_chain', 'contact_estimation_estimation',
                    'contact_estimation_proximity', 'contact_estimation_relay']

# ROS 2 Python wheels (ros-python-wheels, Kilted) for machines without a ROS distribution.
# Kept in an extra so that a ROS install, which provides these itself, does not pull them.
ROS_WHEELS = [
    'ros-rclpy[fastrtps]==9.1.2',
    'ros-rmw-fastrtps-cpp==9.3.3',
    'ros-sensor-msgs==5.5.1',
    'ros-geometry-msgs==5.5.1',
    'ros-std-msgs==5.5.1',
    'ros-std-srvs==5.5.1',
    'ros-visualization-msgs==5.5.1',
    'ros-diagnostic-msgs==5.5.1',
    'ros-rosgraph-msgs==2.3.0',
]

setup(
    name=PACKAGE,
    version='0.1.0',
    packages=find_packages(exclude=['test']),
    package_data={PACKAGE: ['nodes.yaml']},
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + PACKAGE]),
        ('share/' + PACKAGE, ['package.xml']),
        ('share/' + PACKAGE + '/launch', glob('launch/*.launch.py')),
        ('share/' + PACKAGE + '/config', glob('config/*.yaml') + glob('config/*.xml')
         + glob('config/*.json')),
        ('share/' + PACKAGE + '/config/scenarios', glob('config/scenarios/*.yaml')),
        ('share/' + PACKAGE + '/urdf', glob('urdf/*.urdf')),
        ('share/' + PACKAGE + '/rviz', glob('rviz/*.rviz')),
    ],
    python_requires='>=3.10',
    install_requires=[
        'setuptools',
        'numpy>=1.24',
        'scipy>=1.10',
        'pyyaml>=6',
        'matplotlib>=3.7',
        'tqdm>=4.60',
        'pin==4.1.0',
        'open3d==0.20.0',
        'mujoco==3.3.7',
        'example-robot-data-loaders==5.0.0',
        'rosbags==0.11.9',
        'foxglove-sdk==0.30.3',   # `contact-estimation view`: Foxglove's WebSocket server
        'numba==0.68.1',          # the chain's per-sample kernels (core/compiled.py)
    ],
    extras_require={
        'ros': ROS_WHEELS,
        # websockets and protobuf: the Foxglove client of test_view and benchmarks/view_cost.py
        # (contact_estimation/foxglove_client.py); mcap: reading the view's recording (its
        # test, contact_estimation/view_picture.py)
        'test': ['pytest>=7', 'ruff>=0.6', 'websockets==17.4', 'protobuf==7.36.2',
                 'mcap==1.6.0'],
    },
    zip_safe=True,
    maintainer='contact_estimation maintainers',
    maintainer_email='maintainers@contact-estimation.invalid',
    description='Collision detection and contact estimation for collaborative robot arms.',
    license='Apache-2.0',
    tests_require=['pytest'],
    entry_points={
        'console_scripts': [
            f'{name} = {PACKAGE}.nodes.__main__:main' for name in [*NODE_SCRIPTS, *COMPOSED_SCRIPTS]
        ] + ['contact-estimation = contact_estimation.cli:main'],
    },
)
