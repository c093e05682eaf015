"""Build hook for the optional C chain of recipe.cache.keys (everything else is in pyproject.toml).

``recipe.cache._chainhash`` links OpenSSL's libcrypto (headers: Debian's libssl-dev). It is optional:
where it cannot be compiled, the install goes on and recipe.cache.keys uses its pure-Python chains,
which give the same keys (``recipe.cache.keys.ACCELERATED`` tells which is in use).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "recipe.cache._chainhash",
            sources=["recipe/cache/_chainhash.c"],
            libraries=["crypto"],
            extra_compile_args=["-O2", "-std=c99"],
            optional=True,
        )
    ]
)
