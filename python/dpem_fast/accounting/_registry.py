"""Accountants by name: the choices an estimator's ``accountant`` takes."""
import functools
import inspect

from ._base import PrivacyAccountant
from ._dp_composition import AdvancedAccountant, LinearAccountant
from ._gdp import GDPAccountant
from ._pld import PLDAccountant
from ._rdp_accountants import MomentsAccountant, RDPAccountant
from ._validation import check_neighbouring
from ._zcdp import ZCDPAccountant

__all__ = ["ACCOUNTANTS", "get_accountant"]

# name -> class
_CLASSES = {
    "gdp": GDPAccountant,
    "rdp": RDPAccountant,
    "zcdp": ZCDPAccountant,
    "moments": MomentsAccountant,
    "advanced": AdvancedAccountant,
    "linear": LinearAccountant,
    "pld": PLDAccountant,
}

#: Names accepted by :func:`get_accountant` (and estimators' ``accountant``).
ACCOUNTANTS = tuple(_CLASSES)


def get_accountant(name, neighbouring):
    """Factory of fresh accountants of one kind under one relation.

    Parameters
    ----------
    name : str or PrivacyAccountant subclass
        One of :data:`ACCOUNTANTS` (``"gdp"``: :class:`GDPAccountant`,
        ``"rdp"``: :class:`RDPAccountant`, ``"zcdp"``:
        :class:`ZCDPAccountant`, ``"moments"``: :class:`MomentsAccountant`,
        ``"advanced"``: :class:`AdvancedAccountant`, ``"linear"``:
        :class:`LinearAccountant`, ``"pld"``: :class:`PLDAccountant`), or
        an accountant class itself (default arguments apart from
        ``neighbouring``).
    neighbouring : {"add_remove", "replace"}
        Relation of every accountant the factory makes.

    Returns
    -------
    callable
        Zero-argument factory; each call returns a new, empty accountant
        with ``accountant.neighbouring == neighbouring``.

    Raises
    ------
    ValueError
        If ``name`` is neither a known name nor a
        :class:`PrivacyAccountant` subclass (the message names
        ``accountant`` and lists the choices), or if ``neighbouring`` is
        not a relation (the message names ``neighbouring``).
    """
    if (isinstance(name, type) and issubclass(name, PrivacyAccountant)
            and not inspect.isabstract(name)):
        cls = name
    elif isinstance(name, str) and name in _CLASSES:
        cls = _CLASSES[name]
    else:
        raise ValueError(f"accountant must be one of {ACCOUNTANTS} or a "
                         f"concrete PrivacyAccountant subclass, got {name!r}")
    return functools.partial(cls, neighbouring=check_neighbouring(neighbouring))
