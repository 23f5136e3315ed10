#!/usr/bin/env python3
"""Prints horovodrun's option list as horovod/runner/launch.py's parser defines it, one option per line:

    NAMES<TAB>DEST<TAB>VALUES

NAMES: the option strings, comma-separated, as written; DEST: argparse's dest (given or derived);
VALUES: how many words follow it (0 for flags). Read from the source with Python's ast, without
importing Horovod. tests/data/horovodrun_options.tsv is this output for Horovod 0.28.1;
tests/test_horovodrun_options.cpp compares the two when the Horovod tarball is there.

    scripts/horovodrun_options.py path/to/horovod/runner/launch.py
"""
import ast
import sys

FLAG_ACTIONS = {'store_true', 'store_false', 'version', 'help', 'count'}


def keyword(call, name):
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def values_taken(call):
    nargs = keyword(call, 'nargs')
    if isinstance(nargs, ast.Constant) and isinstance(nargs.value, int):
        return nargs.value
    action = keyword(call, 'action')
    if isinstance(action, ast.Constant) and action.value in FLAG_ACTIONS:
        return 0
    if isinstance(action, ast.Call):
        # horovodrun's own actions: make_override_{true,false}_action, make_deprecated_bool_action and
        # make_check_build_action take no value (nargs=0 in their __init__); the others take one.
        name = action.func.id if isinstance(action.func, ast.Name) else ''
        if name in ('make_override_true_action', 'make_override_false_action', 'make_deprecated_bool_action',
                    'make_check_build_action'):
            return 0
    return 1


def main(path):
    tree = ast.parse(open(path, encoding='utf-8').read(), path)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == 'add_argument'):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if not names or not names[0].startswith('-'):
            continue  # the positional command
        dest = keyword(node, 'dest')
        if isinstance(dest, ast.Constant):
            dest = dest.value
        else:
            longs = [n for n in names if n.startswith('--')]
            dest = (longs[0] if longs else names[0]).lstrip('-').replace('-', '_')
        print('%s\t%s\t%d' % (','.join(names), dest, values_taken(node)))


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit('usage: horovodrun_options.py LAUNCH_PY')
    main(sys.argv[1])
