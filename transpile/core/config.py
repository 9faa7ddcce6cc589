"""The cluster config: YAML in, a validated frozen ClusterConfig out.

Every error names the file, the key and (where YAML gives one) the line.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Optional, Union

from .errors import ConfigError
from . import styles as style_traits
from . import yamlread
from .files import read_bytes
from .yamlread import NESTED, shown

MODES = ("sync", "async", "half_async", "geo")
STYLES = tuple(style_traits.STYLES)
SPLIT_METHODS = ("round_robin", "hash_name", "balanced")
PADDLE_FAULTS = ("reproduce", "fix")


@dataclass(frozen=True)
class ClusterConfig:
    pservers: tuple
    trainers: int = 1
    trainer_id: Union[int, str] = 0      # an int in [0, trainers) or "all"
    mode: str = "sync"
    style: str = style_traits.DEFAULT_STYLE
    slice_var_up: bool = True
    min_block_size: int = 8192
    split_method: str = "round_robin"
    geo_push_nums: int = 100
    lr_scheduler: Union[bool, str] = "auto"  # True, False or "auto" (ir/lr_schedule.py)
    paddle_faults: str = "reproduce"         # reproduce | fix (plan/faults.py)
    # style ps: the DistributedStrategy settings that reach the descriptors (ps_strategy.py)
    adam_d2sum: bool = False
    # as written (PaddleRec's table_parameters:, strategy.fleet_desc_configs, runner.fs_client);
    # mappings, so left out of the hash
    table_parameters: Optional[dict] = field(default=None, hash=False)
    fleet_desc_configs: Optional[dict] = field(default=None, hash=False)
    fs_client_param: Optional[dict] = field(default=None, hash=False)

    def trainer_ids(self) -> list[int]:
        """The trainer ids this config asks for."""
        if self.trainer_id == "all":
            return list(range(self.trainers))
        return [int(self.trainer_id)]

    @property
    def sync_mode(self) -> bool:
        return self.mode == "sync"

    @property
    def fix_faults(self) -> bool:
        """`paddle_faults: fix`: write splits that train like the original where Paddle's
        do not (plan/faults.py)."""
        return self.paddle_faults == "fix"

    @property
    def traits(self):
        """What the config's style is (core/styles.py): ask it, never compare the name."""
        return style_traits.traits(self.style)

    def strategy_tables(self) -> list:
        """The strategy's downpour_table_param entries the ps settings make: [(setting, table
        name, entry)], setting table_parameters or fleet_desc_configs, table_parameters'
        first (the_one_ps reads the first entry whose table_name is the table's; entries:
        ps_strategy.py)."""
        from .fleet_desc import fleet_desc_entries
        from .ps_strategy import table_parameter_entries

        def err(key, bad):
            return ConfigError("%s: %s" % (key, bad.problem))
        out = []
        if self.table_parameters is not None:
            out += [("table_parameters", n, e)
                    for n, e in table_parameter_entries(self.table_parameters, err)]
        if self.fleet_desc_configs is not None:
            out += [("fleet_desc_configs", n, e)
                    for n, e in fleet_desc_entries(self.fleet_desc_configs, err)]
        return out

    def fs_client(self) -> Optional[dict]:
        """The strategy's fs_client_param (uri, user, passwd, hadoop_bin), or None."""
        from .ps_strategy import fs_client
        if self.fs_client_param is None:
            return None
        return fs_client(self.fs_client_param, lambda key, bad: ConfigError(bad.problem))

    def to_dict(self, every_key: bool = False) -> dict:
        """The config as plain data; the ps settings only where set (or `every_key`)."""
        d = asdict(self)
        d["pservers"] = list(self.pservers)
        for key in PS_FIELDS:
            if not every_key and d[key] in (None, False):
                del d[key]
        return d


PS_FIELDS = ("adam_d2sum", "table_parameters", "fleet_desc_configs", "fs_client_param")
FIELDS = ("pservers", "trainers", "trainer_id", "mode", "style", "slice_var_up",
          "min_block_size", "split_method", "geo_push_nums", "lr_scheduler",
          "paddle_faults") + PS_FIELDS


def _line(lines, key):
    return " (line %d)" % lines[key] if key in lines else ""


def load_config_text(text: str, source: str = "<config>") -> ClusterConfig:
    """Parse and validate YAML text; errors are ConfigError('<source>: ...')."""
    import yaml
    try:
        data, lines = yamlread.load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = " at line %d, column %d" % (mark.line + 1, mark.column + 1) if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError("%s: YAML syntax error%s: %s" % (source, where, problem)) from None
    except ConfigError as e:
        raise ConfigError("%s: %s" % (source, e.message)) from None
    except (ValueError, RecursionError) as e:
        raise ConfigError("%s: cannot read YAML: %s" % (source, e)) from None
    if data is None:
        raise ConfigError("%s: the config is empty (it needs at least `pservers:`)" % source)
    if not isinstance(data, dict):
        raise ConfigError("%s: the config must be a mapping of keys (pservers:, trainers:, ...), "
                          "not a %s" % (source, type(data).__name__))
    return from_dict(data, source, lines)


def load_config(path: str) -> ClusterConfig:
    raw = read_bytes(path, ConfigError, "config file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError("%s: not UTF-8 text (byte %d)" % (path, e.start)) from None
    return load_config_text(text, path)


def _err(source, key, lines, msg):
    return ConfigError("%s: %s%s: %s" % (source, key, _line(lines, key), msg))


# the ranges of the numbers (docs/cluster-config.md): what Paddle's int32 attrs hold, and what a
# split can write (MAX_TRAINERS: a sync pserver keeps a copy of each gradient block per
# trainer; MAX_ALL_TRAINERS: `trainer_id: all` writes a folder per trainer)
INT32_MAX = 2 ** 31 - 1
MAX_TRAINERS = 10000
MAX_ALL_TRAINERS = 256
MAX_PSERVERS = 10000
WHY_MAX = {"trainers": " (a sync pserver keeps a copy of every gradient block per trainer)",
           "min_block_size": " (an int32 attr)", "geo_push_nums": " (an int32 attr)"}


def _int(data, key, source, lines, minimum, maximum=INT32_MAX):
    v = data[key]
    if isinstance(v, bool) or not isinstance(v, int):
        raise _err(source, key, lines, "expected an integer, got %s%s" % (shown(v), _hint(v)))
    if v < minimum:
        raise _err(source, key, lines, "must be >= %d, got %d" % (minimum, v))
    if v > maximum:
        raise _err(source, key, lines, "must be <= %d%s, got %s" % (
            maximum, WHY_MAX.get(key, ""), shown(v)))
    return v


def _hint(v) -> str:
    """What YAML 1.1 would have made of a text `v` that this reader leaves as text."""
    if not isinstance(v, str):
        return ""
    if re.fullmatch(r"[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?", v):
        return " (a base-60 number to YAML 1.1; write the number itself)"
    if re.fullmatch(r"[-+]?0[0-7_]+", v):
        return " (an octal number to YAML 1.1; write it without the leading 0)"
    if v.lower() in ("yes", "no", "on", "off", "y", "n"):
        return " (a boolean to YAML 1.1; write true or false)"
    return ""


def _choice(data, key, source, lines, choices):
    v = data[key]
    if not isinstance(v, str) or v not in choices:
        raise _err(source, key, lines, "must be one of %s, got %s" % (", ".join(choices),
                                                                   shown(v)))
    return v


# what a Paddle endpoint's host can be: a name or IPv4 address (letters, digits, '.', '-'), or
# an IPv6 address in brackets; at most MAX_HOST characters, so that its folder
# pserver_<host>_<port> is a file name (255 bytes)
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]*|\[[0-9A-Fa-f:.]+\]")
MAX_HOST = 240


def parse_endpoint(ep: Any) -> Optional[str]:
    """The reason an endpoint is malformed, or None when it is a valid host:port."""
    if not isinstance(ep, str):
        return "expected a \"host:port\" string, got %s" % shown(ep)
    host, sep, port = ep.rpartition(":")
    if not sep or not host:
        return "%s is not host:port" % shown(ep)
    if not _HOST.fullmatch(host):
        return "%s: the host may hold letters, digits, '.' and '-' (or be an IPv6 address " \
               "in brackets)" % shown(ep)
    if len(host) > MAX_HOST:
        return "%s: the host is %d characters long, at most %d" % (shown(ep), len(host),
                                                                   MAX_HOST)
    if not re.fullmatch(r"[0-9]{1,5}", port):
        return "%s: the port must be a number" % shown(ep)
    if not 1 <= int(port) <= 65535:
        return "%s: the port must be in 1-65535" % shown(ep)
    return None


def endpoint_key(ep: str) -> tuple:
    """What two endpoints that are the same server share: the host ignoring case, the port."""
    host, _, port = ep.rpartition(":")
    return host.lower(), int(port)


def from_dict(data: dict, source: str = "<config>", lines: Optional[dict] = None) -> ClusterConfig:
    lines = lines or {}
    for key in data:
        if key not in FIELDS:
            close = difflib.get_close_matches(str(key), FIELDS, n=1)
            hint = "; did you mean %r?" % close[0] if close else \
                "; known keys: %s" % ", ".join(FIELDS)
            raise ConfigError("%s: unknown key %r%s%s" % (source, key, _line(lines, key), hint))
    if "pservers" not in data:
        raise ConfigError("%s: pservers: missing (a list of host:port endpoints)" % source)
    eps = data["pservers"]
    if isinstance(eps, str):
        eps = [e.strip() for e in eps.split(",") if e.strip()]
    if not isinstance(eps, list):
        raise _err(source, "pservers", lines, "expected a list of host:port, got %s" % shown(eps))
    if not eps:
        raise _err(source, "pservers", lines, "the list is empty (at least one endpoint)")
    if len(eps) > MAX_PSERVERS:
        raise _err(source, "pservers", lines, "%d endpoints, at most %d" % (len(eps),
                                                                          MAX_PSERVERS))
    for ep in eps:
        why = parse_endpoint(ep)
        if why:
            raise _err(source, "pservers", lines, why)
    seen: dict = {}
    for i, ep in enumerate(eps):
        first = eps[seen.setdefault(endpoint_key(ep), i)]
        if seen[endpoint_key(ep)] != i:
            raise _err(source, "pservers", lines, "%r is listed twice%s" % (
                ep, "" if first == ep else " (as %r: host names ignore case)" % first))
    kw: dict = {"pservers": tuple(eps)}
    if "trainers" in data:
        kw["trainers"] = _int(data, "trainers", source, lines, 1, MAX_TRAINERS)
    trainers = kw.get("trainers", 1)
    if "trainer_id" in data:
        tid = data["trainer_id"]
        if tid != "all":
            tid = _int(data, "trainer_id", source, lines, 0)
            if tid >= trainers:
                raise _err(source, "trainer_id", lines,
                           "%d is out of range: trainers is %d, so ids are 0..%d"
                           % (tid, trainers, trainers - 1))
        elif trainers > MAX_ALL_TRAINERS:
            raise _err(source, "trainer_id", lines, _all_too_many(trainers))
        kw["trainer_id"] = tid
    if "mode" in data:
        kw["mode"] = _choice(data, "mode", source, lines, MODES)
    if "style" in data:
        kw["style"] = _choice(data, "style", source, lines, STYLES)
    style = style_traits.traits(kw.get("style", style_traits.DEFAULT_STYLE))
    if kw.get("mode", "sync") not in style.modes:
        raise _err(source, "mode", lines, "style %s runs %s (%s), got %r" % (
            style.name, ", ".join(style.modes), style.modes_note, kw["mode"]))
    if "slice_var_up" in data:
        if not isinstance(data["slice_var_up"], bool):
            raise _err(source, "slice_var_up", lines, "expected true or false, got %s%s"
                       % (shown(data["slice_var_up"]), _hint(data["slice_var_up"])))
        kw["slice_var_up"] = data["slice_var_up"]
    if "min_block_size" in data:
        kw["min_block_size"] = _int(data, "min_block_size", source, lines, 1)
    if "split_method" in data:
        kw["split_method"] = _choice(data, "split_method", source, lines, SPLIT_METHODS)
    if "geo_push_nums" in data:
        kw["geo_push_nums"] = _int(data, "geo_push_nums", source, lines, 1)
    if "lr_scheduler" in data:
        v = data["lr_scheduler"]
        if not (isinstance(v, bool) or v == "auto"):
            raise _err(source, "lr_scheduler", lines,
                       "expected auto, true or false, got %s%s" % (shown(v), _hint(v)))
        kw["lr_scheduler"] = v
    if "paddle_faults" in data:
        kw["paddle_faults"] = _choice(data, "paddle_faults", source, lines, PADDLE_FAULTS)
    kw.update(_ps_settings(data, source, lines, kw.get("style", style_traits.DEFAULT_STYLE)))
    return ClusterConfig(**kw)


def _ps_settings(data: dict, source: str, lines: dict, style: str) -> dict:
    """The strategy settings of style ps, each read the way Paddle's setter reads it (a value
    it refuses is an error naming the key and saying Paddle's exception)."""
    from .ps_strategy import adam_d2sum, fs_client, table_parameter_entries
    from .fleet_desc import fleet_desc_entries
    kw: dict = {}
    present = [k for k in PS_FIELDS if k in data]
    if present and not style_traits.traits(style).strategy_settings:
        raise _err(source, present[0], lines, "a setting of style ps (Paddle 2.1+'s "
                   "DistributedStrategy); this config's style is %s" % style)
    where: dict = {}
    nested = lines.get(NESTED, {})

    def err(key, bad):
        if key in where:
            mapping, k = where[key]
            line = nested.get(id(mapping), {}).get(k)
        else:
            line = key_line(data, lines, key)
        paddle = " (Paddle: %s)" % bad.paddle if bad.paddle else ""
        return ConfigError("%s: %s%s: %s%s" % (source, key, " (line %d)" % line if line
                                               else "", bad.problem, paddle))

    if "adam_d2sum" in data:
        kw["adam_d2sum"] = adam_d2sum(data["adam_d2sum"], err)
    if "table_parameters" in data:
        table_parameter_entries(data["table_parameters"], err, where)
        kw["table_parameters"] = data["table_parameters"]
    if "fleet_desc_configs" in data:
        fleet_desc_entries(data["fleet_desc_configs"], err)
        kw["fleet_desc_configs"] = data["fleet_desc_configs"]
    if "fs_client_param" in data:
        fs_client(data["fs_client_param"], err)
        kw["fs_client_param"] = data["fs_client_param"]
    return kw


def key_line(data: dict, lines: dict, dotted: str) -> Optional[int]:
    """The line of the deepest key of `dotted` (a.b.c; a key may hold dots itself) that the
    YAML read into `data` / `lines` has."""
    nested = lines.get(NESTED, {})
    node, rest, best = data, dotted, None
    while isinstance(node, dict) and rest:
        key = next((k for k in sorted(node, key=lambda k: -len(str(k)))
                    if rest == str(k) or rest.startswith(str(k) + ".")), None)
        if key is None:
            break
        best = nested.get(id(node), {}).get(key, best)
        node, rest = node[key], rest[len(str(key)) + 1:]
    return best


def load_config_lines(path: str):
    """(ClusterConfig, data, lines) of a config file: what `config check` reports lines by."""
    raw = read_bytes(path, ConfigError, "config file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError("%s: not UTF-8 text (byte %d)" % (path, e.start)) from None
    cfg = load_config_text(text, path)
    data, lines = yamlread.load(text)
    return cfg, data, lines


def _all_too_many(trainers: int) -> str:
    return ("all: writes a folder per trainer, at most %d of them (trainers is %d): write "
            "one with --trainer-id N" % (MAX_ALL_TRAINERS, trainers))


def with_trainer_id(cfg: ClusterConfig, trainer_id) -> ClusterConfig:
    """The config with trainer_id replaced (an int or "all"), validated against trainers."""
    from dataclasses import replace
    if trainer_id == "all" and cfg.trainers > MAX_ALL_TRAINERS:
        raise ConfigError("--trainer-id " + _all_too_many(cfg.trainers))
    if trainer_id != "all":
        if not 0 <= int(trainer_id) < cfg.trainers:
            raise ConfigError("--trainer-id %s is out of range: trainers is %d, so ids are 0..%d"
                              % (trainer_id, cfg.trainers, cfg.trainers - 1))
        trainer_id = int(trainer_id)
    return replace(cfg, trainer_id=trainer_id)
