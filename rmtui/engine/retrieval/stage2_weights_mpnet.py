"""Weights of the learned second stage, written by bench/fit_stage2.py (do not edit by hand).

Fitted for the embedding model all-mpnet-base-v2 on 1981 development questions (118860 candidate rows) from
locomo/first, locomo/heading, locomo/inside, locomo/last, notes; held out: LoCoMo conv-42, conv-43 (every layout) and
the notes project(s) cargo.
"""

from rmtui.engine.retrieval.stage2_model import Weights

#: without token states
PLAIN = Weights(
    features=(
        'own', 'window', 'lexical', 'dense', 'dense_gap', 'dense_prev', 'dense_next', 'own_prev', 'own_next', 'fused',
        'coverage', 'length', 'fused_prev', 'fused_next', 'rank_fused', 'rank_dense', 'rank_lexical', 'centroid',
        'first', 'own_raw', 'lexical_prev', 'lexical_next', 'coherence_prev', 'coherence_next', 'lead', 'subject',
        'context_cover', 'named_subject', 'dated', 'dated_when', 'own*thread', 'window*thread', 'lexical*thread',
        'dense*thread', 'dense_gap*thread', 'dense_prev*thread', 'dense_next*thread', 'own_prev*thread',
        'own_next*thread', 'fused*thread', 'coverage*thread', 'length*thread', 'fused_prev*thread', 'fused_next*thread',
        'rank_fused*thread', 'rank_dense*thread', 'rank_lexical*thread', 'centroid*thread', 'first*thread',
        'own_raw*thread', 'lexical_prev*thread', 'lexical_next*thread', 'coherence_prev*thread',
        'coherence_next*thread', 'lead*thread', 'subject*thread', 'context_cover*thread', 'named_subject*thread',
        'dated*thread', 'dated_when*thread',
    ),
    mean=(
        0.231378, 0.331971, 0.273363, 0.328182, -0.236552, 0.194317, 0.199086, 0.124779, 0.121759, 0.531104, 0.15636,
        5.01199, 0.340265, 0.348549, 3.1438, 3.69816, 3.5553, 0.576535, 0.457407, 0.88409, 0.163047, 0.161479, 0.526209,
        0.548316, 0.12407, 0.508876, 0.0220835, 0.491191, 0.119519, 0.0317096, 0.020793, 0.0268611, 0.0234795,
        0.0303148, -0.0156055, 0.0187806, 0.0192196, 0.0115648, 0.0112325, 0.047074, 0.0151799, 0.383301, 0.0316244,
        0.0323384, 0.239585, 0.295687, 0.283386, 0.050914, 0.0416009, 0.0831661, 0.014605, 0.0143998, 0.0453552,
        0.0471199, 0.0143399, 0.0538139, 0.00195636, 0.0543877, 0.0124531, 0.00305316,
    ),
    scale=(
        0.250252, 0.295881, 0.242659, 0.137981, 0.122315, 0.126776, 0.121114, 0.18138, 0.175198, 0.201341, 0.16759,
        0.527467, 0.197354, 0.185301, 0.89326, 1.32188, 1.29649, 0.16992, 0.184448, 0.999379, 0.182941, 0.1771,
        0.210924, 0.185059, 0.329662, 0.499921, 0.0510177, 0.499922, 0.324398, 0.175226, 0.0323688, 0.0405068,
        0.0337243, 0.0281282, 0.0194916, 0.0205378, 0.0202474, 0.0226752, 0.0219988, 0.0455307, 0.0219779, 0.367859,
        0.0343432, 0.033749, 0.246475, 0.307065, 0.290812, 0.0464781, 0.0393944, 0.128393, 0.0242617, 0.0236827,
        0.0452469, 0.044485, 0.0405307, 0.0633152, 0.00634395, 0.062551, 0.0370073, 0.0182081,
    ),
    coef=(
        -0.103948, 0.353226, -0.389818, 0.389538, 0.439428, 0.196946, 0.194852, -0.142813, -0.224669, 0.460227,
        0.587219, -0.0676204, 0.117165, 0.0114744, -0.249219, -0.277267, 0.0518513, -0.0581398, 0.0186434, 0.227046,
        0.257129, 0.180409, -0.383039, -0.159903, -0.0885913, 0.197834, 0.0371651, 0.822893, 0.206376, 0.41793,
        -0.199156, 0.731257, -0.0611353, -0.449934, -0.649297, 0.414995, 0.244044, -0.103758, 0.125572, -0.123088,
        -0.0920615, 0.76059, -0.00728226, -0.360818, -0.146347, 0.00228847, 0.054525, 0.0431107, -0.00733099,
        -0.0340123, 0.151078, -0.273501, -0.511758, 0.187454, 0.112467, 0.139649, 0.412882, 0.278327, 0.0140945,
        -0.124298,
    ),
    thread_span=(-0.116, 0.215),
)

#: with token states
TOKENS = Weights(
    features=(
        'own', 'window', 'lexical', 'dense', 'dense_gap', 'dense_prev', 'dense_next', 'own_prev', 'own_next', 'fused',
        'coverage', 'length', 'fused_prev', 'fused_next', 'rank_fused', 'rank_dense', 'rank_lexical', 'centroid',
        'first', 'own_raw', 'lexical_prev', 'lexical_next', 'coherence_prev', 'coherence_next', 'lead', 'subject',
        'context_cover', 'named_subject', 'dated', 'dated_when', 'own*thread', 'window*thread', 'lexical*thread',
        'dense*thread', 'dense_gap*thread', 'dense_prev*thread', 'dense_next*thread', 'own_prev*thread',
        'own_next*thread', 'fused*thread', 'coverage*thread', 'length*thread', 'fused_prev*thread', 'fused_next*thread',
        'rank_fused*thread', 'rank_dense*thread', 'rank_lexical*thread', 'centroid*thread', 'first*thread',
        'own_raw*thread', 'lexical_prev*thread', 'lexical_next*thread', 'coherence_prev*thread',
        'coherence_next*thread', 'lead*thread', 'subject*thread', 'context_cover*thread', 'named_subject*thread',
        'dated*thread', 'dated_when*thread', 'maxsim', 'maxsim*thread',
    ),
    mean=(
        0.231378, 0.331971, 0.273363, 0.328182, -0.236552, 0.194317, 0.199086, 0.124779, 0.121759, 0.531104, 0.15636,
        5.01199, 0.340265, 0.348549, 3.1438, 3.69816, 3.5553, 0.576535, 0.457407, 0.88409, 0.163047, 0.161479, 0.526209,
        0.548316, 0.12407, 0.508876, 0.0220835, 0.491191, 0.119519, 0.0317096, 0.020793, 0.0268611, 0.0234795,
        0.0303148, -0.0156055, 0.0187806, 0.0192196, 0.0115648, 0.0112325, 0.047074, 0.0151799, 0.383301, 0.0316244,
        0.0323384, 0.239585, 0.295687, 0.283386, 0.050914, 0.0416009, 0.0831661, 0.014605, 0.0143998, 0.0453552,
        0.0471199, 0.0143399, 0.0538139, 0.00195636, 0.0543877, 0.0124531, 0.00305316, 0.385589, 0.0341515,
    ),
    scale=(
        0.250252, 0.295881, 0.242659, 0.137981, 0.122315, 0.126776, 0.121114, 0.18138, 0.175198, 0.201341, 0.16759,
        0.527467, 0.197354, 0.185301, 0.89326, 1.32188, 1.29649, 0.16992, 0.184448, 0.999379, 0.182941, 0.1771,
        0.210924, 0.185059, 0.329662, 0.499921, 0.0510177, 0.499922, 0.324398, 0.175226, 0.0323688, 0.0405068,
        0.0337243, 0.0281282, 0.0194916, 0.0205378, 0.0202474, 0.0226752, 0.0219988, 0.0455307, 0.0219779, 0.367859,
        0.0343432, 0.033749, 0.246475, 0.307065, 0.290812, 0.0464781, 0.0393944, 0.128393, 0.0242617, 0.0236827,
        0.0452469, 0.044485, 0.0405307, 0.0633152, 0.00634395, 0.062551, 0.0370073, 0.0182081, 0.122263, 0.0308641,
    ),
    coef=(
        -0.135014, 0.365955, -0.366813, -0.101093, -0.11404, 0.219214, 0.19507, -0.151838, -0.213454, 0.318471,
        0.451863, -0.193698, 0.163013, 0.0104813, -0.273497, -0.236848, 0.0549176, -0.0967926, 0.0210635, 0.206177,
        0.260614, 0.185868, -0.41963, -0.151759, -0.0558596, 0.17193, 0.0905318, 0.807129, 0.170758, 0.415306,
        -0.208315, 0.704737, -0.101503, -0.38679, -0.558174, 0.41711, 0.227238, -0.112084, 0.0849991, -0.0914548,
        0.0213697, 0.695327, 0.0377995, -0.374344, -0.171869, -0.0473304, 0.060779, 0.0988238, -0.00797359, -0.0556836,
        0.157336, -0.258023, -0.571548, 0.186787, 0.0855578, 0.105026, 0.423199, 0.308006, 0.0395057, -0.122512,
        1.51057, -0.206092,
    ),
    thread_span=(-0.116, 0.215),
)
