"""Every node deletes only its own namespace's markers on the shared marker topic."""
import ast
import pathlib

import pytest
from visualization_msgs.msg import Marker

import contact_estimation
from contact_estimation.ros.markers import cleared

PACKAGE = pathlib.Path(contact_estimation.__file__).parent


def _deleteall_uses() -> list[tuple[str, str]]:
    """(module, enclosing function) of every `DELETEALL` named in the package's code, but in a
    comparison (a marker read, as the live view reads the proximity monitor's, is not one
    published)."""
    uses = []

    def visit(node, module: str, function: str) -> None:
        if isinstance(node, ast.Compare):
            return
        if isinstance(node, ast.Attribute) and node.attr == 'DELETEALL':
            uses.append((module, function))
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                else function
            visit(child, module, inner)

    for path in sorted(PACKAGE.rglob('*.py')):
        visit(ast.parse(path.read_text(), str(path)), str(path.relative_to(PACKAGE)), '<module>')
    return uses


def test_no_node_publishes_a_deleteall_without_its_namespace():
    """rviz2 deletes every namespace's markers on a DELETEALL without `ns`: the only one is
    ros/markers.cleared, which needs a namespace."""
    assert set(_deleteall_uses()) == {('ros/markers.py', 'cleared')}
    with pytest.raises(ValueError, match='namespace'):
        cleared('')
    marker = cleared('collision')
    assert (marker.action, marker.ns) == (Marker.DELETEALL, 'collision')
