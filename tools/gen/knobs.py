"""What each table setting of a ps case did to the descriptors: the case's worker / server descs
against the same case run bare (no settings).  Runs with Paddle's python (it parses PSParameter
text with Paddle's own the_one_ps_pb2):

    python knobs.py BARE_CASE_DIR CASE_DIR SETTINGS.json   -> JSON on stdout

{"bare": how the bare case was made,
 "settings": [{"setting": dotted key, "value", "desc_field", "effect"}],
 "other_changes": [{"table", "field", "before", "after"}]   changes no setting names: what Paddle
                                                            fills in for them,
 "desc_changes": {role: {"tables": {table: [[field, before, after]]}, "other": [...]}
                  or "the same as trainer_0"}}
Values are compared as check_dir.py compares descs: scalars by value (the proto default where
unset), floats to 6 significant digits; a sub-message present on one side only is one change
(null before or after).
"""
import json
import os
import sys

from google.protobuf import text_format

REPEATED = 3


def _proto():
    from paddle.distributed.fleet.proto import the_one_ps_pb2
    return the_one_ps_pb2.PSParameter


def _scalar(fd, v):
    if fd.type == fd.TYPE_ENUM:
        ev = fd.enum_type.values_by_number.get(v)
        return ev.name if ev else v
    if fd.cpp_type in (fd.CPPTYPE_FLOAT, fd.CPPTYPE_DOUBLE):
        return float('%.6g' % v)
    return v


def as_dict(msg):
    out = {}
    for fd, v in msg.ListFields():
        if fd.label == REPEATED:
            out[fd.name] = [as_dict(x) if fd.message_type else _scalar(fd, x) for x in v]
        else:
            out[fd.name] = as_dict(v) if fd.message_type else _scalar(fd, v)
    return out


def flatten(msg, prefix=''):
    """{path: value}: scalars (defaults where unset), repeated fields as lists, an absent
    sub-message as None, a present one recursed."""
    out = {}
    for fd in msg.DESCRIPTOR.fields:
        path, v = prefix + fd.name, getattr(msg, fd.name)
        if fd.label == REPEATED:
            out[path] = [as_dict(x) if fd.message_type else _scalar(fd, x) for x in v]
        elif fd.message_type:
            out.update(flatten(v, path + '.') if msg.HasField(fd.name) else {path: None})
        else:
            out[path] = _scalar(fd, v)
    return out


def diff(a, b, sub_a, sub_b):
    """[[path, before, after]] between two flattened messages (sub_*: path -> message)."""
    changes, seen = [], set()
    for k in list(a) + [k for k in b if k not in a]:
        if k in a and k in b:
            if a[k] != b[k]:
                changes.append([k, a[k], b[k]])
            continue
        parts = k.split('.')
        for i in range(1, len(parts)):
            anc = '.'.join(parts[:i])
            if (anc in a and a[anc] is None) or (anc in b and b[anc] is None):
                if anc not in seen:
                    seen.add(anc)
                    before = None if a.get(anc, 0) is None else as_dict(sub_a(anc))
                    after = None if b.get(anc, 0) is None else as_dict(sub_b(anc))
                    changes.append([anc, before, after])
                break
    return changes


def _get(msg, path):
    for p in path.split('.'):
        msg = getattr(msg, p)
    return msg


def load(path):
    msg = _proto()()
    with open(path) as f:
        text_format.Parse(f.read(), msg)
    return msg


def tables(msg):
    out = {}
    for t in msg.server_param.downpour_server_param.downpour_table_param:
        out[t.common.table_name or 'table_%d' % t.table_id] = t
    return out


def desc_changes(bare, case):
    ta, tb = tables(bare), tables(case)
    per_table = {}
    for name in list(ta) + [n for n in tb if n not in ta]:
        if name not in ta or name not in tb:
            per_table[name] = [['(table)', name in ta, name in tb]]
            continue
        a, b = ta[name], tb[name]
        ch = diff(flatten(a), flatten(b), lambda p: _get(a, p), lambda p: _get(b, p))
        if ch:
            per_table[name] = ch
    fa, fb = flatten(bare.fs_client_param, 'fs_client_param.'), flatten(case.fs_client_param,
                                                                        'fs_client_param.')
    other = [c for c in diff(fa, fb, lambda p: _get(bare, p), lambda p: _get(case, p))]
    if bare.HasField('fs_client_param') != case.HasField('fs_client_param'):
        other = [['fs_client_param', as_dict(bare.fs_client_param) or None,
                  as_dict(case.fs_client_param) or None]]
    return {'tables': per_table, 'other': other}


def role_files(case_dir):
    exp = os.path.join(case_dir, 'expected')
    out = {}
    for role in sorted(os.listdir(exp)):
        for f in ('worker_desc.txt', 'server_desc.txt'):
            if os.path.isfile(os.path.join(exp, role, f)):
                out[role] = os.path.join(exp, role, f)
    return out


def _dump(v):
    return json.dumps(v)


def effect(changes, after, path):
    """What happened at a desc field path, given its table's changes."""
    for c in changes:
        if c[0] == path:
            return '%s -> %s' % (_dump(c[1]), _dump(c[2]))
    for c in changes:
        if path.startswith(c[0] + '.'):
            return '%s: %s -> %s' % (c[0], _dump(c[1]), _dump(c[2]))
    if path in after:
        return 'no change (the bare desc has %s here too)' % _dump(after[path])
    return 'not a field of the desc: ignored'


def _covered(change, paths):
    return any(change[0] == p or p.startswith(change[0] + '.') or change[0].startswith(p + '.')
               for p in paths)


def attribute(settings, bare, case, changes):
    """(knob entries, other changes) for trainer_0's descs."""
    import tables as tablesmod
    tb = tables(case)
    knobs, covered = [], {}
    for key, value in tablesmod.flatten(settings.get('table_parameters', {}),
                                        'table_parameters').items():
        name, path = key.split('.')[1], '.'.join(key.split('.')[2:])
        covered.setdefault(name, []).append(path)
        if name not in tb:
            eff = 'no table %s in the program: ignored' % name
        else:
            eff = effect(changes['tables'].get(name, []), flatten(tb[name]), path)
        knobs.append({'setting': key, 'value': value,
                      'desc_field': 'downpour_table_param[%s].%s' % (name, path), 'effect': eff})
    if 'adam_d2sum' in settings:
        dense = changes['tables'].get('MergedDense', [])
        covered['MergedDense'] = ['common']
        knobs.append({'setting': 'adam_d2sum', 'value': settings['adam_d2sum'],
                      'desc_field': 'downpour_table_param[MergedDense].common',
                      'effect': '; '.join('%s: %s -> %s' % (c[0], _dump(c[1]), _dump(c[2]))
                                          for c in dense) or 'no change'})
    if 'fs_client_param' in settings:
        applied = tablesmod.fs_client(settings['fs_client_param']) or {}
        other = {c[0]: c for c in changes['other']}
        for k in sorted(set(settings['fs_client_param']) | set(applied)):
            c = other.get('fs_client_param')
            eff = ('in fs_client_param: %s' % _dump((c[2] or {}).get(k)) if c else 'no change')
            if not applied:
                eff = 'not set: PaddleRec sets fs_client_param only with a uri'
            knobs.append({'setting': 'fs_client_param.%s' % k,
                          'value': settings['fs_client_param'].get(k, applied.get(k)),
                          'desc_field': 'fs_client_param.%s' % k, 'effect': eff})
    for name, cfg in settings.get('fleet_desc_configs', {}).items():
        ch = changes['tables'].get(name, [])
        covered[name] = ['']
        for k, v in cfg.items():
            knobs.append({'setting': 'fleet_desc_configs.%s.%s' % (name, k), 'value': v,
                          'desc_field': 'downpour_table_param[%s]' % name,
                          'effect': 'table %s: %d fields changed with its fleet_desc_configs '
                                    '(desc_changes)' % (name, len(ch))})
    others = []
    for name, ch in changes['tables'].items():
        paths = covered.get(name, [])
        if '' in paths:
            continue
        others += [{'table': name, 'field': c[0], 'before': c[1], 'after': c[2]}
                   for c in ch if not _covered(c, paths)]
    return knobs, others


def main(argv):
    bare_dir, case_dir, settings_path = argv
    with open(settings_path) as f:
        settings = json.load(f)
    bare_files, case_files = role_files(bare_dir), role_files(case_dir)
    per_role, first = {}, None
    order = sorted(case_files, key=lambda r: (not r.startswith('trainer_'), r))
    for role in order:
        path = case_files[role]
        if role not in bare_files:
            per_role[role] = 'no such role in the bare case'
            continue
        ch = desc_changes(load(bare_files[role]), load(path))
        if first is not None and ch == first:
            per_role[role] = 'the same as trainer_0'
        else:
            per_role[role] = ch
            first = ch if first is None else first
    t0 = case_files.get('trainer_0')
    knobs, others = attribute(settings, load(bare_files['trainer_0']), load(t0),
                              per_role['trainer_0'])
    out = {'bare': 'the same case without any of the settings (every role run again: same '
                   'model, cluster, mode, DistributedStrategy defaults); "before -> after" = '
                   'bare desc -> this case\'s desc',
           'settings': knobs, 'other_changes': others,
           'other_changes_are': 'desc fields no setting names that changed with the settings: '
                                'what Paddle fills in for them (the_one_ps Accessor._set '
                                'defaults for the configured accessor / rule)',
           'desc_changes': per_role}
    json.dump(out, sys.stdout, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
