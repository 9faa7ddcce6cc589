"""A role's model: built by a registered builder, or parsed from an input main.pb / startup.pb
with the optimizer to drive with.  Runs inside a role process (Paddle imported).

    m = load.Model(paddle, spec)          # the programs (empty for a builder until build())
    with m.guard():
        loss, opt = m.build()              # builder: layers made; input: the parsed loss var
        ...user_opt.minimize or fleet...   # then the style's pipeline
        m.save_input(case_dir)             # main.pb / startup.pb as they were fed to the pipeline

For an input model, build() returns an optimizer whose minimize does nothing (the program already
holds its backward and optimizer ops): Paddle's pipeline calls it where it would have run the
user's minimize.  If the optimizer has an LR scheduler, minimize installs it as the program's
lr_scheduler (what Optimizer._create_global_learning_rate does), with the startup's learning
rate var as lr_var.
"""
import contextlib
import os

import models
import optimizers
import outputs


def find_loss(program):
    """The loss var of a program with its backward: the var whose @GRAD the first backward op
    (fill_constant, op_role Backward|Loss = 257) fills."""
    for op in program.global_block().ops:
        if op.type == 'fill_constant' and int(op.attr('op_role')) == 257:
            name = op.output('Out')[0]
            if name.endswith('@GRAD'):
                return name[:-len('@GRAD')]
    raise ValueError('no loss: the program has no backward (fill_constant op_role 257)')


def _lr_var_name(program, opt):
    """The learning-rate var the optimizer ops of the program read (learning_rate_0...)."""
    for op in program.global_block().ops:
        if 'LearningRate' in op.input_names and op.input('LearningRate'):
            return op.input('LearningRate')[0]
    return None


class Model:
    def __init__(self, paddle, spec):
        self.paddle = paddle
        self.spec = spec['model']
        static = paddle.static
        self.unique = paddle.utils.unique_name
        if 'input' in self.spec:
            d = self.spec['input']
            with open(os.path.join(d, 'main.pb'), 'rb') as f:
                self.main = static.Program.parse_from_string(f.read())
            with open(os.path.join(d, 'startup.pb'), 'rb') as f:
                self.startup = static.Program.parse_from_string(f.read())
        else:
            self.main, self.startup = static.Program(), static.Program()
        self.intercepted = 'input' in self.spec
        self.after_minimize = []

    @contextlib.contextmanager
    def guard(self):
        with self.paddle.static.program_guard(self.main, self.startup):
            with self.unique.guard():
                yield self

    def build(self):
        if not self.intercepted:
            loss, opt = models.build(self.paddle, self.spec['builder'])
            if 'optimizer' in self.spec:        # the builder's net, another optimizer
                opt = optimizers.make(self.paddle, self.spec['optimizer'])
        else:
            loss = self.main.global_block().var(self.spec.get('loss') or find_loss(self.main))
            opt = optimizers.make(self.paddle, self.spec['optimizer'])
        self._wrap(opt)
        return loss, opt

    def _wrap(self, opt):
        """Replace opt.minimize: input models skip it; afterwards run self.after_minimize."""
        orig = opt.minimize
        model = self

        def minimize(loss, startup_program=None, parameter_list=None, no_grad_set=None):
            if model.intercepted:
                model._install_scheduler(opt)
                out = ([], [])
            else:
                out = orig(loss, startup_program, parameter_list, no_grad_set)
            for fn in model.after_minimize:
                fn()
            return out
        opt.minimize = minimize

    def _install_scheduler(self, opt):
        lr = getattr(opt, '_learning_rate', None)
        if isinstance(lr, self.paddle.optimizer.lr.LRScheduler):
            name = _lr_var_name(self.main, opt)
            self.main.lr_scheduler = lr
            if name is not None:
                self.main.lr_var = self.main.global_block().var(name)

    def save_input(self, case_dir):
        for prog, name in ((self.main, 'main.pb'), (self.startup, 'startup.pb')):
            with open(os.path.join(case_dir, name), 'wb') as f:
                f.write(outputs.program_bytes(prog))
