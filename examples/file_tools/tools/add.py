"""The simplest tool: a dict with a name, a schema and an execute function."""

add = {
    "name": "add",
    "description": "Add two numbers.",
    "input_schema": {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
    "execute": lambda input: input["a"] + input["b"],
}
