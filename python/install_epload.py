"""Installs (or removes) the built epload package in an interpreter's site-packages.

    <python> <build>/python/install_epload.py                 # into <python>'s site-packages
    <python> <build>/python/install_epload.py --target DIR    # into DIR
    <python> <build>/python/install_epload.py --no-hook       # without epload-autoload.pth
    <python> <build>/python/install_epload.py --uninstall     # remove both again

Copies <build>/python/epload/ (the package and its extension module) and
epload-autoload.pth, the zero-code-change hook (inactive unless
EPLOAD_AUTOLOAD_HOSTS is set; see docs/python.md).
"""

import argparse
import os
import shutil
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
PTH = 'epload-autoload.pth'


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--target', default=sysconfig.get_paths()['purelib'],
                        help="site-packages directory (default: this interpreter's, %(default)s)")
    parser.add_argument('--no-hook', action='store_true', help=f'do not install {PTH}')
    parser.add_argument('--uninstall', action='store_true', help='remove epload and its hook')
    args = parser.parse_args(argv)

    package = os.path.join(args.target, 'epload')
    hook = os.path.join(args.target, PTH)
    if args.uninstall:
        for path in (hook, package):
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.unlink(path)
            else:
                continue
            print(f'removed {path}')
        return 0

    source = os.path.join(HERE, 'epload')
    if not any(n.startswith('_native.') and n.endswith('.so') for n in os.listdir(source)):
        print(f'error: {source} holds no _native extension: build first '
              f'(cmake --build <build>)', file=sys.stderr)
        return 1
    os.makedirs(args.target, exist_ok=True)
    if os.path.exists(package):
        shutil.rmtree(package)
    shutil.copytree(source, package, ignore=shutil.ignore_patterns('.compiled'))
    print(f'installed {package}')
    if not args.no_hook:
        shutil.copyfile(os.path.join(HERE, PTH), hook)
        print(f'installed {hook} (active only when EPLOAD_AUTOLOAD_HOSTS is set)')
    elif os.path.exists(hook):
        os.unlink(hook)
        print(f'removed {hook}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
