"""Which toolkit is active and switching it: selection, environments, shims, pins,
and the system link (``/usr/local/cuda``).

Kept free of imports: every shim imports :mod:`cudaup.switch.shim` through this
package, and a shim must start with the standard library only.
"""

__all__ = [
    "Active",
    "LinkState",
    "detect_shell",
    "find_pin",
    "hand_on",
    "nearest_pin",
    "pinned_release",
    "read_link_state",
    "remove_pin",
    "render_env",
    "resolve_default",
    "select",
    "set_system_link",
    "tool_in",
    "toolkit_env",
    "undo_system_link",
    "write_pin",
]
_EXPORTS = {
    "Active": "cudaup.switch.selection",
    "select": "cudaup.switch.selection",
    "resolve_default": "cudaup.switch.selection",
    "tool_in": "cudaup.switch.selection",
    "toolkit_env": "cudaup.switch.environment",
    "render_env": "cudaup.switch.environment",
    "detect_shell": "cudaup.switch.environment",
    "hand_on": "cudaup.switch.environment",
    "write_pin": "cudaup.switch.pins",
    "remove_pin": "cudaup.switch.pins",
    "find_pin": "cudaup.switch.pins",
    "nearest_pin": "cudaup.switch.pins",
    "pinned_release": "cudaup.switch.pins",
    "LinkState": "cudaup.switch.system_link",
    "read_link_state": "cudaup.switch.system_link",
    "set_system_link": "cudaup.switch.system_link",
    "undo_system_link": "cudaup.switch.system_link",
}


def __getattr__(name: str) -> object:
    # Imported only when a name is asked for: every shim imports this package and must load nothing else.
    from cudaup.core.lazy import exports  # noqa: PLC0415

    return exports(__name__, _EXPORTS)(name)
