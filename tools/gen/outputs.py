"""Writing a role's programs and files into CASE_DIR/expected/<role>/.

Programs are Paddle's bytes, except that the op_callstack frames Paddle records in them that name
this checkout's files (File "<repo>/tools/gen/...") are made relative to the repo root (File
"tools/gen/..."): a case's bytes do not depend on where the generator is checked out.
"""
import json
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def program_bytes(program):
    data = program.desc.serialize_to_string()
    prefix = 'File "%s/' % REPO
    if prefix.encode() not in data:
        return data
    from paddle.base.proto import framework_pb2
    desc = framework_pb2.ProgramDesc.FromString(data)
    for block in desc.blocks:
        for op in block.ops:
            for attr in op.attrs:
                if attr.name == 'op_callstack':
                    for i, line in enumerate(attr.strings):
                        if prefix in line:
                            attr.strings[i] = line.replace(prefix, 'File "')
    return desc.SerializeToString()


def role_dir(case_dir, role):
    d = os.path.join(case_dir, 'expected', role)
    os.makedirs(d, exist_ok=True)
    return d


def write_program(case_dir, role, name, program):
    with open(os.path.join(role_dir(case_dir, role), name + '.pb'), 'wb') as f:
        f.write(program_bytes(program))


def write_text(case_dir, role, name, text):
    with open(os.path.join(role_dir(case_dir, role), name), 'w') as f:
        f.write(text)


def write_json(case_dir, role, name, obj):
    write_text(case_dir, role, name, json.dumps(obj, indent=1) + '\n')
