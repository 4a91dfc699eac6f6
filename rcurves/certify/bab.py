"""Branch and bound on ReLU splits: a frontier of subdomains, split where the bound fails.

CROWN's bound is loose where hidden ReLUs are *unstable* on the ball (their
pre-activation bounds ``l < 0 < u``): each is replaced by its triangle
relaxation. Splitting an unstable unit ``i`` into the two cases ``h_i >= 0``
(the unit is the identity) and ``h_i <= 0`` (it is zero) removes its
relaxation; the ball is certified when every case is. A *subdomain* is a set
of such cases, one sign per split unit (``sgn (H,)`` over all hidden units:
``-1`` split active, ``+1`` split inactive, ``0`` not split); the subdomains
of a frontier partition the input space, so the ball is certified when the
margin bound is positive on each of them.

Branch and bound (the loop of alpha-beta-CROWN, Wang et al. 2021,
"Beta-CROWN: efficient bound propagation with per-neuron split constraints"):

1. bound the root (the whole ball); certified if its bound is positive;
2. otherwise the frontier holds the root; each iteration takes the ``batch``
   (a number, or ``"auto"``: sized to the device, ``bab_batch``)
   frontier subdomains with the lowest bounds, splits each on its own
   highest-scoring unstable unit into two children, bounds the ``2 batch``
   children side by side (``vmap``), drops the children that are certified
   (or empty: some unit's bounds crossed) and puts the others in the frontier;
3. until the frontier is empty (certified), or it fails: the ``budget`` of
   subdomains bounded is spent, the frontier (``capacity`` slots) overflows, or a
   subdomain whose bound fails has no unstable unit left to split (in
   :func:`bab_search`, only when the exact LP of such a subdomain,
   ``bab_lp._exact_leaf``, neither proves it nor yields a confirmed
   counterexample).

Each concept has its own module in ``rcurves/certify/``; each imports only the ones above it:

* ``bab_settings``: :class:`BaBConfig`, the settings of one search (batch, budget, Adam steps, branching rule,
  cuts, ...), and :func:`bab_config`, which builds one;
* ``bab_root``: what every subdomain of a ball shares, bounded once at the root (the hidden layers' bounds,
  alpha-CROWN's with ``tighten``; the margins branched on);
* ``bab_cuts``: Anderson et al.'s cuts of the first layer (``cuts``): separated from the root LP, mixed into
  every subdomain's bound;
* ``bab_bounds``: one subdomain's bound (alpha-beta-CROWN; the second layer by split corrections) and the unit
  it splits next (BaBSR, FSB);
* ``bab_device``: the search inside one jitted program (:func:`bab_certify_point`) and
  ``certified_radius(method='bab')``'s bisection over radii (:data:`bab_jit`);
* ``bab_lp``: the LPs of the host search (HiGHS): a fully split subdomain's exact minimum, the second layer's
  LP bounds (``second_cuts``);
* ``bab_step``: the jitted programs of one step of the host search (the ball's shared arrays; a batch of
  parents split, their children bounded);
* ``bab_pool``: the host search's frontier, kept on the device: subdomains taken and put by small jitted
  programs, a capacity that doubles when full;
* ``bab_batch``: ``batch="auto"``: the batch from the device's cap and XLA's memory analysis of the bound step;
* ``bab_host``: one ball's search driven from the host (:func:`bab_search`, ``certify.verify``'s last stage):
  a clock between steps, a few numbers copied to the host per step.

This module gathers their public names.
"""
from rcurves.certify.bab_device import Frontier, bab_certify_point, bab_jit
from rcurves.certify.bab_host import SearchResult, bab_search
from rcurves.certify.bab_settings import BRANCHING, BaBConfig, bab_config

__all__ = ["BRANCHING", "BaBConfig", "Frontier", "SearchResult", "bab_certify_point", "bab_config", "bab_jit",
           "bab_search"]
