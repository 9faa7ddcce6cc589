"""Writing a role's programs and files into CASE_DIR/expected/<role>/."""
import json
import os


def role_dir(case_dir, role):
    d = os.path.join(case_dir, 'expected', role)
    os.makedirs(d, exist_ok=True)
    return d


def write_program(case_dir, role, name, program):
    with open(os.path.join(role_dir(case_dir, role), name + '.pb'), 'wb') as f:
        f.write(program.desc.serialize_to_string())


def write_text(case_dir, role, name, text):
    with open(os.path.join(role_dir(case_dir, role), name), 'w') as f:
        f.write(text)


def write_json(case_dir, role, name, obj):
    write_text(case_dir, role, name, json.dumps(obj, indent=1) + '\n')
