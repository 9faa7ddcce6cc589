/* The writer's compiled fast path (optional): the parts of a BlockDesc that protowrite.py
 * otherwise assembles piece by piece in Python.
 *
 * A split to many pservers writes hundreds of thousands of new vars and ops (each pserver's
 * optimize blocks, its vars, its startup's init ops); in Python each slot, name and frame is
 * a few objects and calls. Here each is written straight into one buffer:
 *
 *   op_head(inputs, outputs, type)   OpDesc fields 1-3: every input slot, every output slot
 *                                     (in the dicts' order), the type
 *   plain_var(name, vtype, tail)     a VarDesc: its name field, then vtype and tail as given
 *   block(head, vars, ops, tail)     a BlockDesc body: head, each var framed as field 3, each
 *                                     op as field 4, tail
 *
 * The bytes are the ones protowrite.py's pure-Python path writes (tests/test_wirewrite.py
 * compares both). op_head takes only dicts of lists (or tuples) of str, exactly those types;
 * given anything else it returns None and protowrite.py writes the op in Python. Without a C
 * compiler the module is not built and the pure-Python path runs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static Py_ssize_t
varint_size(uint64_t n)
{
    Py_ssize_t k = 1;
    while (n >= 0x80) {
        n >>= 7;
        k++;
    }
    return k;
}

static char *
put_varint(char *p, uint64_t n)
{
    while (n >= 0x80) {
        *p++ = (char)((n & 0x7F) | 0x80);
        n >>= 7;
    }
    *p++ = (char)n;
    return p;
}

/* a length-delimited field's key, length and payload */
static char *
put_field(char *p, char key, const char *data, Py_ssize_t n)
{
    *p++ = key;
    p = put_varint(p, (uint64_t)n);
    memcpy(p, data, (size_t)n);
    return p + n;
}

static Py_ssize_t
field_size(Py_ssize_t n)
{
    return 1 + varint_size((uint64_t)n) + n;
}

/* The size of one slot's body (OpDesc.Var: parameter = 1, arguments = 2), or -1 with an
 * exception set, or -2 when `args` is not exactly a list (or tuple) of str. */
static Py_ssize_t
slot_body_size(PyObject *slot, PyObject *args)
{
    Py_ssize_t n, i, len, total;
    if (!PyUnicode_CheckExact(slot) || !(PyList_CheckExact(args) || PyTuple_CheckExact(args)))
        return -2;
    if (PyUnicode_AsUTF8AndSize(slot, &len) == NULL)
        return -1;
    total = field_size(len);
    n = PySequence_Fast_GET_SIZE(args);
    for (i = 0; i < n; i++) {
        PyObject *a = PySequence_Fast_GET_ITEM(args, i);
        if (!PyUnicode_CheckExact(a))
            return -2;
        if (PyUnicode_AsUTF8AndSize(a, &len) == NULL)
            return -1;
        total += field_size(len);
    }
    return total;
}

/* The size of a dict of slots written as repeated field `key`, or -1 / -2 as above. */
static Py_ssize_t
slots_size(PyObject *slots)
{
    Py_ssize_t pos = 0, total = 0;
    PyObject *slot, *args;
    if (!PyDict_CheckExact(slots))
        return -2;
    while (PyDict_Next(slots, &pos, &slot, &args)) {
        Py_ssize_t body = slot_body_size(slot, args);
        if (body < 0)
            return body;
        total += field_size(body);
    }
    return total;
}

/* Write what slots_size measured (the UTF-8 of every str is cached by then). */
static char *
put_slots(char *p, char key, PyObject *slots)
{
    Py_ssize_t pos = 0, len, i, n;
    PyObject *slot, *args;
    while (PyDict_Next(slots, &pos, &slot, &args)) {
        const char *s = PyUnicode_AsUTF8AndSize(slot, &len);
        *p++ = key;
        p = put_varint(p, (uint64_t)slot_body_size(slot, args));
        p = put_field(p, 0x0a, s, len);
        n = PySequence_Fast_GET_SIZE(args);
        for (i = 0; i < n; i++) {
            s = PyUnicode_AsUTF8AndSize(PySequence_Fast_GET_ITEM(args, i), &len);
            p = put_field(p, 0x12, s, len);
        }
    }
    return p;
}

static PyObject *
op_head(PyObject *self, PyObject *args)
{
    PyObject *inputs, *outputs, *type, *out;
    Py_ssize_t in_size, out_size, type_len;
    const char *type_s;
    char *p;
    if (!PyArg_ParseTuple(args, "OOU:op_head", &inputs, &outputs, &type))
        return NULL;
    in_size = slots_size(inputs);
    if (in_size == -1)
        return NULL;
    out_size = in_size < 0 ? in_size : slots_size(outputs);
    if (out_size == -1)
        return NULL;
    if (out_size == -2 || in_size == -2)
        Py_RETURN_NONE;
    type_s = PyUnicode_AsUTF8AndSize(type, &type_len);
    if (type_s == NULL)
        return NULL;
    out = PyBytes_FromStringAndSize(NULL, in_size + out_size + field_size(type_len));
    if (out == NULL)
        return NULL;
    p = PyBytes_AS_STRING(out);
    p = put_slots(p, 0x0a, inputs);         /* OpDesc.inputs = 1 */
    p = put_slots(p, 0x12, outputs);        /* OpDesc.outputs = 2 */
    put_field(p, 0x1a, type_s, type_len);   /* OpDesc.type = 3 */
    return out;
}

static PyObject *
plain_var(PyObject *self, PyObject *args)
{
    const char *name;
    Py_ssize_t name_len;
    Py_buffer vtype, tail;
    PyObject *out;
    char *p;
    if (!PyArg_ParseTuple(args, "s#y*y*:plain_var", &name, &name_len, &vtype, &tail))
        return NULL;
    out = PyBytes_FromStringAndSize(NULL, field_size(name_len) + vtype.len + tail.len);
    if (out != NULL) {
        p = put_field(PyBytes_AS_STRING(out), 0x0a, name, name_len);   /* VarDesc.name = 1 */
        memcpy(p, vtype.buf, (size_t)vtype.len);
        memcpy(p + vtype.len, tail.buf, (size_t)tail.len);
    }
    PyBuffer_Release(&vtype);
    PyBuffer_Release(&tail);
    return out;
}

/* the total size of a list of bytes, each framed as a length-delimited field; -1 on error */
static Py_ssize_t
framed_size(PyObject *items)
{
    Py_ssize_t i, n = PyList_GET_SIZE(items), total = 0;
    for (i = 0; i < n; i++) {
        PyObject *x = PyList_GET_ITEM(items, i);
        if (!PyBytes_Check(x)) {
            PyErr_Format(PyExc_TypeError, "block: item %zd is %.100s, not bytes", i,
                         Py_TYPE(x)->tp_name);
            return -1;
        }
        total += field_size(PyBytes_GET_SIZE(x));
    }
    return total;
}

static char *
put_framed(char *p, char key, PyObject *items)
{
    Py_ssize_t i, n = PyList_GET_SIZE(items);
    for (i = 0; i < n; i++) {
        PyObject *x = PyList_GET_ITEM(items, i);
        p = put_field(p, key, PyBytes_AS_STRING(x), PyBytes_GET_SIZE(x));
    }
    return p;
}

static PyObject *
block(PyObject *self, PyObject *args)
{
    PyObject *head, *vars, *ops, *tail, *out;
    Py_ssize_t vars_size, ops_size;
    char *p;
    if (!PyArg_ParseTuple(args, "SO!O!S:block", &head, &PyList_Type, &vars, &PyList_Type,
                          &ops, &tail))
        return NULL;
    vars_size = framed_size(vars);
    if (vars_size < 0)
        return NULL;
    ops_size = framed_size(ops);
    if (ops_size < 0)
        return NULL;
    out = PyBytes_FromStringAndSize(NULL, PyBytes_GET_SIZE(head) + vars_size + ops_size +
                                    PyBytes_GET_SIZE(tail));
    if (out == NULL)
        return NULL;
    p = PyBytes_AS_STRING(out);
    memcpy(p, PyBytes_AS_STRING(head), (size_t)PyBytes_GET_SIZE(head));
    p += PyBytes_GET_SIZE(head);
    p = put_framed(p, 0x1a, vars);          /* BlockDesc.vars = 3 */
    p = put_framed(p, 0x22, ops);           /* BlockDesc.ops = 4 */
    memcpy(p, PyBytes_AS_STRING(tail), (size_t)PyBytes_GET_SIZE(tail));
    return out;
}

static PyMethodDef methods[] = {
    {"op_head", op_head, METH_VARARGS,
     "op_head(inputs, outputs, type): OpDesc fields 1-3 as bytes; None unless the slots are "
     "exactly dicts of lists (or tuples) of str"},
    {"plain_var", plain_var, METH_VARARGS,
     "plain_var(name, vtype, tail): the name field, then vtype and tail"},
    {"block", block, METH_VARARGS,
     "block(head, vars, ops, tail): head, each var bytes as field 3, each op as field 4, tail"},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "wirewrite_c",
    "The writer's compiled fast path: OpDesc heads, plain VarDescs, BlockDesc bodies.",
    -1, methods, NULL, NULL, NULL, NULL
};

PyMODINIT_FUNC
PyInit_wirewrite_c(void)
{
    return PyModule_Create(&module);
}
