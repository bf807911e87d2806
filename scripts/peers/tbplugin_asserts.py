#!/usr/bin/env python3
"""Extract the values the TensorBoard profiler plugin's tests assert.

Usage: tbplugin_asserts.py TB_PLUGIN_DIR OUT_DIR

TB_PLUGIN_DIR is tb_plugin/ of pytorch/kineto at the last commit that had it
(041e7ce9). The script runs the plugin's own tests (test/test_profiler.py,
with the plugin's sources; needs pandas and numpy, e.g. Debian's
python3-pandas) with every assert method recorded, and reads
test/result_check_file.txt (the plugin's HTTP answers for span 1 of the two
resnet50 samples). It writes

  OUT_DIR/test_profiler/<test>[.<n>].json           each inline trace, as the
                                                    plugin parsed it (the distributed
                                                    tests' as <test>/<worker>.pt.trace.json)
  OUT_DIR/asserts.jsonl.gz                          one asserted value a line (gzip)

Each line: {"src": file:line, "test", "traces": [paths under OUT_DIR],
"worker", "q", "key": [...], "field", "want", "tol"}; q names the table
(step, avg, op, op_shape, kernel, kernel_op, gpu, util, mem, memstat, comm,
dist_overlap, dist_wait, count, flag, module, recommendation), key the row,
field the column; tol is the precision the plugin gives the value (0.5 for
rounded microseconds). The test bookkeeping (loop counters, dictionary
membership) is not recorded. Traces keep their names; the two samples are
copied by the caller.
"""
import ast
import re
import json
import os
import sys
import unittest
import warnings

ROLES = ['kernel', 'memcpy', 'memset', 'communication', 'runtime', 'dataloader', 'cpu_exec', 'other', 'total']


def main():
    tb, out = sys.argv[1], sys.argv[2]
    sys.path[:0] = [tb, os.path.join(tb, 'test')]
    warnings.simplefilter('ignore')
    os.makedirs(os.path.join(out, 'test_profiler'), exist_ok=True)
    rows = []
    rows += test_profiler_asserts(tb, out)
    rows += result_check_asserts(tb)
    rows = dedupe(rows)
    import gzip
    with gzip.open(os.path.join(out, 'asserts.jsonl.gz'), 'wt', compresslevel=9) as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=True) + '\n')
    print(f'{len(rows)} asserted values', file=sys.stderr)


# ---------------------------------------------------------------------------
# test_profiler.py: run the tests, record each assert with its frame


def test_profiler_asserts(tb, out):
    import test_profiler as tp
    from torch_tb_profiler.profiler.overall_parser import ProfileRole

    path = os.path.join(tb, 'test', 'test_profiler.py')
    src = open(path).read()
    calls = {}
    for n in ast.walk(ast.parse(src)):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr.startswith('assert'):
            for line in range(n.lineno, n.end_lineno + 1):
                calls.setdefault(line, n)

    traces = {}   # id(profile) -> (trace path, worker)
    written = {}  # test -> number of traces written
    cur = {'test': None}
    orig_parse = tp.parse_json_trace

    def parse(json_content, worker_name=tp.WORKER_NAME):
        test = cur['test']
        n = written.get(test, 0)
        written[test] = n + 1
        if test.startswith('test_distributed'):
            # named as tensorboard_trace_handler names a worker's trace
            rel = f'test_profiler/{test}/{worker_name}.pt.trace.json'
        else:
            rel = f'test_profiler/{test}{"." + str(n) if n else ""}.json'
        os.makedirs(os.path.dirname(os.path.join(out, rel)), exist_ok=True)
        events = json.loads(json_content)
        with open(os.path.join(out, rel), 'w') as f:
            json.dump({'schemaVersion': 1, 'traceEvents': events}, f, indent=1)
            f.write('\n')
        p = orig_parse(json_content, worker_name)
        traces[id(p)] = (rel, worker_name)
        return p
    tp.parse_json_trace = parse

    role_field = {int(getattr(ProfileRole, r)): f for r, f in
                  [('Kernel', 'kernel'), ('Memcpy', 'memcpy'), ('Memset', 'memset'), ('Communication', 'communication'),
                   ('Runtime', 'runtime'), ('DataLoader', 'dataloader'), ('CpuOp', 'cpu_exec'), ('Other', 'other'),
                   ('Total', 'total')]}
    rows = []

    def record(kind):
        orig = getattr(unittest.TestCase, kind)

        def f(self, *a, **k):
            fr = sys._getframe(1)
            while fr.f_code.co_filename != tp.__file__:
                fr = fr.f_back
            node = calls[fr.f_lineno]
            expr = ast.get_source_segment(src, node.args[0]) if node.args else ''
            want = a[1] if len(a) > 1 else a[0]
            loc = dict(fr.f_locals)
            if 'profile' not in loc and fr.f_back is not None and 'profile' in fr.f_back.f_locals:
                loc['profile'] = fr.f_back.f_locals['profile']  # a helper nested in the test
            ctx = Ctx(self._testMethodName, node.lineno, kind, expr, a[0], want, loc, traces, role_field)
            for r in ctx.rows():
                rows.append(r)
            return orig(self, *a, **k)
        setattr(unittest.TestCase, kind, f)
    for k in ['assertEqual', 'assertAlmostEqual', 'assertTrue', 'assertIn', 'assertIsNone', 'assertFalse']:
        record(k)

    class Tracker(unittest.TextTestResult):
        def startTest(self, test):
            cur['test'] = test._testMethodName
            super().startTest(test)
    suite = unittest.defaultTestLoader.loadTestsFromModule(tp)
    with open(os.devnull, 'w') as devnull:
        res = unittest.TextTestRunner(stream=devnull, resultclass=Tracker).run(suite)
    if not res.wasSuccessful():
        sys.exit(f'the plugin\'s tests failed: {res.failures + res.errors}')
    # a trace the tests read themselves (the module view's)
    return rows


class Ctx:
    """One assert call: the expression, the values and the caller's locals."""

    def __init__(self, test, line, kind, expr, got, want, loc, traces, role_field):
        self.test, self.line, self.kind, self.expr = test, line, kind, ' '.join(expr.split())
        self.got, self.want, self.loc, self.traces, self.role_field = got, want, loc, traces, role_field

    def base(self, profile=None):
        if profile is None:
            profile = self.loc.get('profile') or self.loc.get('profile0')
        rel, worker = self.traces.get(id(profile), (None, ''))
        return {'src': f'test_profiler.py:{self.line}', 'test': self.test, 'traces': [rel] if rel else [],
                'worker': worker}

    def row(self, q, key, field, want, tol=0.0, profile=None, base=None):
        r = dict(base or self.base(profile))
        if tol == 0.0 and self.kind == 'assertAlmostEqual':
            tol = 5e-8  # assertAlmostEqual's 7 places
            if 'occupancy' in field:
                tol /= 100
        r.update({'q': q, 'key': [str(k) for k in key], 'field': field, 'want': want, 'tol': tol})
        return r

    def rows(self):
        e, L, want = self.expr, self.loc, self.want
        # test bookkeeping: loop counters, membership
        if e in ('op_count', 'count', 'gpu_util_id', 'sm_efficiency_id', 'index') or self.kind == 'assertIn':
            return []
        if self.test == 'test_build_module_hierarchy':
            return [self.module_row()]
        if e.startswith('step.costs[ProfileRole.'):
            p = L['profile']
            k = next(i for i, s in enumerate(p.steps_costs) if s is L['step'])
            role = int(eval(e[len('step.costs['):-1], {'ProfileRole': type(sys.modules['torch_tb_profiler.profiler.overall_parser'].ProfileRole.Kernel)}))
            return [self.row('step', [k], self.role_field[role], want)]
        if e.startswith('profile.avg_costs.costs[ProfileRole.'):
            return [self.row('avg', [], 'total', want)]
        for pn in ('profile0', 'profile1'):
            if e.startswith(pn + '.steps_costs[0].costs'):
                p = L[pn]
                if e.endswith('costs[3]'):
                    return [self.row('step', [0], 'communication', want, profile=p)]
                return [self.row('step', [0], ROLES[i], v, profile=p) for i, v in enumerate(want)]
            if e == f'len({pn}.comm_node_list)':
                return [self.row('count', [], 'comm_ops', want, profile=L[pn])]
            if e == f'{pn}.has_communication':
                return [self.row('flag', [], 'has_communication', want, profile=L[pn])]
        if e == 'len(profile.steps_costs)':
            return [self.row('count', [], 'steps', want)]
        if e in ('len(profile.op_list_groupby_name)', 'len(profile.op_list_groupby_name_input)'):
            return [self.row('count', [], 'ops' if e.endswith('name)') else 'op_shapes', want)]
        if e == 'len(profile.kernel_list_groupby_name_op)':
            return [self.row('count', [], 'kernel_ops', want)]
        if e == 'profile.kernel_stat.shape[0]':
            return [self.row('count', [], 'kernels', want)]
        if e in ('profile.has_runtime', 'profile.has_kernel', 'profile.has_memcpy_or_memset'):
            return [self.row('flag', [], e.split('.')[1], want)]
        if e == 'not profile.has_memcpy_or_memset':
            return [self.row('flag', [], 'has_memcpy_or_memset', not want)]
        if e.startswith('op_agg.') or e.startswith('profile.op_list_groupby_name[') or e.startswith('agg_op.'):
            return [self.op_row()]
        if e.startswith('profile.kernel_stat.iloc[') or e.startswith('row['):
            return [self.kernel_row()]
        if (e.startswith('profile.kernel_list_groupby_name_op[') or e.startswith('agg_kernel.')
                or e.startswith('str(agg_kernel.') or e.startswith('agg_by_op.')):
            return [self.kernel_op_row()]
        if e.startswith('profile.gpu_metrics_parser.') or e == 'len(profile.gpu_metrics_parser.gpu_ids)':
            return self.gpu_rows()
        if e in ('b[0]', 'b[1]'):
            p = L['profile']
            gpu = L['gpu_id']
            k = L['gpu_util_id']
            return [self.row('util', [gpu, k], 'time_us' if e == 'b[0]' else 'ratio', want)]
        if e in ('r[0]', 'r[1]', 'r[2]', '0'):
            # the plugin's SM-efficiency ranges (elementary intervals of the sweep)
            k = L['sm_efficiency_id']
            return [self.row('sm_ranges', [L['gpu_id'], k], {'r[0]': 'start_us', 'r[1]': 'end_us'}.get(e, 'value'), want)]
        if e == 'profile.tc_ratio[0]':
            return [self.row('gpu', ['0'], 'tensor_core', self.want)]
        if e == 'profile.tc_eligible_ops_kernel_ratio':
            return [self.row('rank', [], 'tensor_core_eligible_ratio', self.want)]
        if e.startswith('dist_profile.'):
            return self.dist_rows()
        if e.startswith('self.event_data_') or e.startswith('start_ts') or e == '1' or e.startswith('len(self.event_data'):
            return self.memcurve_rows()
        if e == '2 * len(self.event_data_cpu) - 1' or e == '2 * len(self.event_data_gpu) - 1':
            return self.memcurve_rows()
        if e == 'len(memory_stats)':
            return [self.row('count', [], 'memory_devices', want)]
        if e == 'mem_stat[name]':
            dev = 'CPU' if L['mem_stat'] is L['memory_stats']['CPU'] else 'GPU0'
            fields = ['self_increase_bytes', 'self_allocation_bytes', 'self_allocations', 'increase_bytes',
                      'allocation_bytes', 'allocations', 'calls']
            return [self.row('memstat', [dev, L['name']], f, v) for f, v in zip(fields, want)]
        if e == 'datapipe_range is not None':
            return [self.row('dataloader_range', ['100', '123'], 'present', True)]
        if e == 'datapipe_op is None':
            return [self.row('op_prefix', ['enumerate(DataPipe)'], 'present', False)]
        raise SystemExit(f'{self.test}:{self.line}: unmapped assert {self.kind}({e})')

    def op_row(self):
        e, L = self.expr, self.loc
        p = L['profile']
        if e.startswith('profile.op_list_groupby_name['):
            op, lst, field = p.op_list_groupby_name[int(e.split('[')[1].split(']')[0])], 'op', e.rsplit('.', 1)[1]
        else:
            var = e.split('.')[0]
            op = L[var]
            lst = 'op'
            if 'op_list' in L and L['op_list'] is p.op_list_groupby_name_input:
                lst = 'op_shape'
            field = e.split('.', 1)[1]
        key = [op.name] + ([op.input_shape] if lst == 'op_shape' else [])
        f = {'calls': 'calls', 'host_duration': 'host_total_us', 'self_host_duration': 'host_self_us',
             'device_duration': 'device_total_us', 'self_device_duration': 'device_self_us',
             'input_shape': 'input_shape', 'tc_eligible': 'tc_eligible', 'tc_self_ratio': 'tc_self_ratio',
             'tc_total_ratio': 'tc_total_ratio'}[field]
        return self.row(lst, key, f, self.want)

    def kernel_row(self):
        e, L, p = self.expr, self.loc, self.loc['profile']
        if e.startswith('row['):
            name, col = L['name'], e[5:-2]
        else:
            i = int(e.split('iloc[')[1].split(']')[0])
            name, col = p.kernel_stat.index[i], e.split("['")[1][:-2]
        f = {'count': 'calls', 'sum': 'total_us', 'mean': 'mean_us', 'min': 'min_us', 'max': 'max_us',
             'blocks_per_sm': 'mean_blocks_per_sm', 'occupancy': 'mean_occupancy'}[col]
        want = self.want
        if f == 'mean_occupancy':
            want /= 100  # the plugin's occupancy is in percent; every "occupancy" here is a ratio
        return self.row('kernel', [name], f, want)

    def kernel_op_row(self):
        e, L, p = self.expr, self.loc, self.loc['profile']
        if e.startswith('profile.kernel_list_groupby_name_op['):
            k = p.kernel_list_groupby_name_op[int(e.split('[')[1].split(']')[0])]
            field = e.rsplit('.', 1)[1]
        else:
            inner = e[4:-1] if e.startswith('str(') else e
            var, field = inner.split('.', 1)
            k = L[var]
        key = [k.name, k.op_name, fmt(k.grid), fmt(k.block), fmt(k.regs_per_thread), fmt(k.shared_memory)]
        f = {'name': 'name', 'op_name': 'op_name', 'grid': 'grid', 'block': 'block', 'regs_per_thread': 'registers',
             'shared_memory': 'shared_memory', 'calls': 'calls', 'total_duration': 'total_us',
             'avg_duration': 'mean_us', 'min_duration': 'min_us', 'max_duration': 'max_us',
             'avg_blocks_per_sm': 'mean_blocks_per_sm', 'avg_occupancy': 'mean_occupancy', 'tc_used': 'tc_used',
             'op_tc_eligible': 'op_tc_eligible'}[field]
        want = self.want
        if f in ('grid', 'block', 'registers', 'shared_memory'):
            want = fmt(want)
        if f == 'mean_occupancy':
            want /= 100
        return self.row('kernel_op', key, f, want)

    def gpu_rows(self):
        e = self.expr
        if e == 'len(profile.gpu_metrics_parser.gpu_ids)':
            return [self.row('count', [], 'gpus', self.want)]
        attr = e.split('.')[2].split('[')[0]
        gpu = e.split('[')[1].split(']')[0]
        f = {'gpu_utilization': 'utilization', 'avg_approximated_sm_efficiency_per_device': 'sm_efficiency',
             'avg_occupancy_per_device': 'occupancy', 'blocks_per_sm_count': 'blocks_per_sm_kernels',
             'occupancy_count': 'occupancy_kernels'}[attr]
        want = self.want
        if e.endswith(' is None'):
            want = None
        elif e.endswith(' > 0'):
            return []  # a count the plugin keeps for its own averages
        elif f == 'occupancy':
            want /= 100
        return [self.row('gpu', [gpu], f, want)]

    def dist_rows(self):
        e, w = self.expr, self.want
        L = self.loc
        worker = re.search(r"'(worker\d+)'", e).group(1)
        dist = L['dist_profile']
        profs = [L['profile0'], L['profile1']]
        b = self.base(profs[0])
        b['traces'] = [self.traces[id(p)][0] for p in profs]
        b['worker'] = worker
        if 'steps_to_overlap' in e:
            names = ['computation_only', 'overlap', 'communication_only', 'other']
            return [self.row('dist_overlap', [0], n, v, base=b) for n, v in zip(names, w)]
        if 'steps_to_wait' in e:
            return [self.row('dist_wait', [0], n, v, base=b) for n, v in zip(['transfer_us', 'wait_us'], w)]
        out = []
        names = ['calls', 'total_bytes', 'mean_bytes', 'total_latency_us', 'mean_latency_us', 'total_transfer_us',
                 'mean_transfer_us']
        for r in w:
            for n, v in zip(names, r[1:]):
                out.append(self.row('comm', [r[0]], n, v, base=b))
        return out

    def memcurve_rows(self):
        # the curve's points per device: time from the profiler start, allocated, reserved
        e, L = self.expr, self.loc
        dev = 'CPU' if 'cpu' in e else 'GPU0'
        if e == '1':  # profiler_start_ts
            return [self.row('mem', ['start'], 'time_us', self.want)]
        step_plot = self.test.endswith('_step_plot') and 'no_step' not in self.test
        if e.startswith('len(') or e.startswith('2 * len('):
            return [self.row('mem', [dev, 'step_plot' if step_plot else 'points'], 'count', self.want)]
        i = L['i']
        col = {'[0] - start_ts': 'time_us', '[-2]': 'allocated', '[-1]': 'reserved'}[e[e.rindex('['):] if not e.endswith('start_ts') else '[0] - start_ts']
        if step_plot:
            return [self.row('mem', [dev, 'step_plot', i], col, self.want)]
        return [self.row('mem', [dev, 'point', i], col, self.want)]

    def module_row(self):
        # the module view (nn.Module hierarchy from python_function events)
        return self.row('module', [self.line], 'name', repr(self.want), base={'src': f'test_profiler.py:{self.line}',
                        'test': self.test, 'traces': [], 'worker': ''})


def fmt(v):
    if v is None:
        return ''
    if isinstance(v, (list, tuple)):
        return '[' + ', '.join(str(x) for x in v) + ']'
    return str(v)


# ---------------------------------------------------------------------------
# result_check_file.txt: the plugin's answers for span 1 of each resnet50 sample

SAMPLES = [('resnet50_num_workers_0', 'worker0.1623143089861.pt.trace.json.gz'),
           ('resnet50_num_workers_4', 'worker0.1623212756351.pt.trace.json.gz')]
VIEWS = ['overview', 'operation', 'operation/table', 'kernel/table', 'kernel']


def result_check_asserts(tb):
    lines = open(os.path.join(tb, 'test', 'result_check_file.txt')).read().splitlines()
    rows = []
    for i, line in enumerate(lines):
        run, trace = SAMPLES[i // 5]
        view = VIEWS[i % 5]
        d = json.loads(line)
        b = {'src': f'result_check_file.txt:{i + 1}', 'test': f'test_tensorboard_end2end {run}',
             'traces': [f'{run}/{trace}'], 'worker': 'worker0'}

        def row(q, key, field, want, tol):
            r = dict(b)
            r.update({'q': q, 'key': [str(k) for k in key], 'field': field, 'want': want, 'tol': tol})
            rows.append(r)
        if view == 'overview':
            cols = [c['name'] for c in d['steps']['columns'] if 'name' in c]
            for r in d['steps']['rows']:
                vals = [v for v in r[1:] if not isinstance(v, str)]
                for c, v in zip(cols[1:], vals):
                    row('step', ['#' + r[0]], role_name(c), v, 0.5)
            perf = d['performance'][0]
            row('avg', [], 'total', perf['value'], 0.5)
            for c in perf['children']:
                row('avg', [], role_name(c['name']), c['value'], 0.5)
            for g in d['gpu_metrics']['data']:
                t, v = g['title'].strip(), g['value']
                if t.startswith('GPU ') and t.endswith(':'):
                    gpu = t[4:-1]
                    continue
                f = {'Name': 'name', 'Memory': 'memory_gb', 'Compute Capability': 'compute_capability',
                     'GPU Utilization': 'utilization', 'Est. SM Efficiency': 'sm_efficiency',
                     'Est. Achieved Occupancy': 'occupancy', 'Kernel Time using Tensor Cores': 'tensor_core'}[t]
                if f in ('utilization', 'sm_efficiency', 'tensor_core'):
                    row('gpu', [gpu], f, float(v.rstrip(' %')) / 100, 0.00005)
                elif f == 'occupancy':
                    row('gpu', [gpu], f, float(v.rstrip(' %')) / 100, 0.00005)
                elif f == 'memory_gb':
                    row('gpu', [gpu], f, float(v.split()[0]), 0.005)
                else:
                    row('gpu', [gpu], f, v, 0)
            rec = d['recommendations']
            for m in re.finditer(r'([\d.]+)% of the step time is in DataLoader', rec):
                row('recommendation', ['dataloader'], 'ratio', float(m.group(1)) / 100, 0.0005)
            for m in re.finditer(r'Kernels with (\d+)% time are launched by Tensor Cores eligible operators', rec):
                row('recommendation', ['tensor_core_eligible'], 'ratio', int(m.group(1)) / 100, 0.005)
            for m in re.finditer(r'GPU ([\d, ]+) (has|have) low utilization', rec):
                row('recommendation', ['low_utilization'], 'gpus', m.group(1), 0)
        elif view == 'operation/table':
            for r in d['data']:
                for f, q in [('calls', 'calls'), ('device_self_duration', 'device_self_us'),
                             ('device_total_duration', 'device_total_us'), ('host_self_duration', 'host_self_us'),
                             ('host_total_duration', 'host_total_us'), ('tc_eligible', 'tc_eligible'),
                             ('tc_self_ratio', 'tc_self_ratio'), ('tc_total_ratio', 'tc_total_ratio')]:
                    v = r[f]
                    tol = 0.5 if f.endswith('duration') else 0
                    if f == 'tc_eligible':
                        v = v == 'Yes'
                    elif f.startswith('tc_'):
                        v, tol = v / 100, 0.00005
                    row('op', [r['name']], q, v, tol)
        elif view == 'kernel/table':
            cols = [c['name'] for c in d['data']['columns']]
            for r in d['data']['rows']:
                name = r[0]
                for c, v in zip(cols[1:], r[1:]):
                    f, tol = {'Tensor Cores Used': ('tc_used', 0), 'Calls': ('calls', 0),
                              'Total Duration (us)': ('total_us', 0.5), 'Mean Duration (us)': ('mean_us', 0.5),
                              'Max Duration (us)': ('max_us', 0.5), 'Min Duration (us)': ('min_us', 0.5),
                              'Mean Blocks Per SM': ('mean_blocks_per_sm', 0.005),
                              'Mean Est. Achieved Occupancy (%)': ('mean_occupancy', 0.00005)}[c]
                    if f == 'tc_used':
                        v = v == 'Yes'
                    if f == 'mean_occupancy':
                        v = v / 100
                    row('kernel', [name], f, v, tol)
        elif view == 'operation':
            # pies of the operator table's values: counted with the table
            for pie, f in [('device_total_time', 'device_total_us'), ('device_self_time', 'device_self_us'),
                           ('host_total_time', 'host_total_us'), ('host_self_time', 'host_self_us')]:
                for name, v in d[pie]['rows']:
                    row('op', [name], f, v, 0.5)
        elif view == 'kernel':
            for name, v in d['total']['rows']:
                row('kernel', [name], 'total_us', v, 0.5)
    return rows


def role_name(c):
    return {'Kernel': 'kernel', 'Memcpy': 'memcpy', 'Memset': 'memset', 'Communication': 'communication',
            'Runtime': 'runtime', 'DataLoader': 'dataloader', 'CPU Exec': 'cpu_exec', 'Other': 'other'}[c]


def dedupe(rows):
    """Keep one row per (traces, q, key, field): the pies repeat the tables."""
    seen, out = {}, []
    for r in rows:
        k = (r['test'], r['worker'], tuple(r['traces']), r['q'], tuple(r['key']), r['field'])
        if k in seen:
            if seen[k]['want'] != r['want']:
                raise SystemExit(f'{r["src"]}: {k} asserted as {seen[k]["want"]} and {r["want"]}')
            continue
        seen[k] = r
        out.append(r)
    return out


if __name__ == '__main__':
    main()
