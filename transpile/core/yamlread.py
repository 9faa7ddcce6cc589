"""Reading a cluster config's YAML: PyYAML's safe loader, made strict where YAML 1.1 surprises.

- Duplicate keys are refused in every mapping (YAML lets the last one win without a word).
- Aliases (`*name`) are bounded: a document whose aliases add more than MAX_EXPANDED values
  once expanded is refused before anything is built (a "billion laughs" of a few lines), as
  is an alias to the node it is in.
- Scalars resolve as YAML 1.2's core schema does where YAML 1.1 surprises: only true / false
  are booleans (yes, no, on, off are text), and no number is read in base 60 (`1:30`, which
  YAML 1.1 reads as 90) or in octal from a leading 0 (`010`, 8): such scalars are text, so a
  key expecting a number refuses them. A number needs a dot or be a plain integer, as in
  YAML 1.1 (`1e-3` is text, `1.0e-3` a number).

load() returns (data, lines): lines[key] is the line of each top-level key, lines[NESTED]
{id(mapping): {key: line}} for every mapping read.
"""
from __future__ import annotations

import re

from .errors import ConfigError

MAX_EXPANDED = 10000        # values a document may hold once its aliases are expanded

NESTED = object()           # lines[NESTED]: {id(mapping): {key: line}} of every mapping read

_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT = re.compile(r"^(?:[-+]?0b[0-1_]+|[-+]?0x[0-9a-fA-F_]+|[-+]?(?:0|[1-9][0-9_]*))$")
_FLOAT = re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                        |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                        |[-+]?\.(?:inf|Inf|INF)
                        |\.(?:nan|NaN|NAN))$""", re.X)

_LOADER: list = []


def _loader_class():
    """The SafeLoader with the resolvers above (made once)."""
    if _LOADER:
        return _LOADER[0]
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    numbers = ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
    Loader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag not in numbers]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    Loader.add_implicit_resolver("tag:yaml.org,2002:bool", _BOOL, list("tTfF"))
    Loader.add_implicit_resolver("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
    Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))
    _LOADER.append(Loader)
    return Loader


def _children(node) -> list:
    import yaml
    if isinstance(node, yaml.SequenceNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return [x for pair in node.value for x in pair]
    return []


def alias_growth(root) -> int:
    """How many values the aliases of the node graph `root` add once expanded (counted up to
    MAX_EXPANDED + 1); ConfigError for an alias to a node it is in."""
    distinct: set = set()
    todo = [root]
    while todo:
        node = todo.pop()
        if id(node) not in distinct:
            distinct.add(id(node))
            todo.extend(_children(node))
    cap = len(distinct) + MAX_EXPANDED + 1
    sizes: dict = {}
    on_path: set = set()

    def size(node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in on_path:
            raise ConfigError("line %d: an alias refers to a node it is in"
                              % (node.start_mark.line + 1))
        on_path.add(key)
        n = 1
        for child in _children(node):
            n = min(n + size(child), cap)
        on_path.discard(key)
        sizes[key] = n
        return n

    return size(root) - len(distinct)


def load(text: str):
    """(data, lines) of a YAML document (see the module doc); (None, {}) when it is empty.
    Raises yaml.YAMLError for what YAML cannot read, ConfigError for what is refused."""
    import yaml
    lines: dict = {}
    nested: dict = {}
    root_holder: dict = {}

    def construct_mapping(loader, node, deep=False):
        mapping = {}
        nested[id(mapping)] = own = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            key = loader.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                raise ConfigError("line %d: a key must be a plain name" % line) from None
            if key in mapping:
                raise ConfigError("line %d: key %r appears twice%s" % (
                    line, key, "" if node is root_holder.get("root") else
                    " in one mapping (YAML would keep the last without a word)"))
            mapping[key] = loader.construct_object(value_node, deep=True)
            own[key] = line
            if node is root_holder.get("root"):
                lines[key] = line
        return mapping

    class Loader(_loader_class()):
        pass

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    loader = Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, lines
        if alias_growth(node) > MAX_EXPANDED:
            raise ConfigError("its aliases (*name) expand it by more than %d values"
                              % MAX_EXPANDED)
        root_holder["root"] = node
        data = loader.construct_document(node)
        lines[NESTED] = nested
        return data, lines
    finally:
        loader.dispose()


def shown(value, most: int = 60) -> str:
    """repr(value) for an error message, cut to about `most` characters."""
    text = repr(value)
    return text if len(text) <= most else text[:most - 5] + " ...%s" % text[-1]
