"""Weights of the learned second stage, written by bench/fit_stage2.py (do not edit by hand).

Fitted on 1981 development questions (118860 candidate rows) from locomo/first, locomo/heading, locomo/inside,
locomo/last, notes; held out: LoCoMo conv-42, conv-43 (every layout) and the notes project(s) cargo.
"""

from rmtui.engine.retrieval.stage2_model import Weights

#: without token states
PLAIN = Weights(
    features=(
        'own', 'window', 'lexical', 'dense', 'dense_gap', 'dense_prev', 'dense_next', 'own_prev', 'own_next', 'fused',
        'coverage', 'length', 'fused_prev', 'fused_next', 'rank_fused', 'rank_dense', 'rank_lexical', 'centroid',
        'first', 'own_raw', 'lexical_prev', 'lexical_next', 'coherence_prev', 'coherence_next', 'lead', 'subject',
        'context_cover', 'named_subject', 'own*thread', 'window*thread', 'lexical*thread', 'dense*thread',
        'dense_gap*thread', 'dense_prev*thread', 'dense_next*thread', 'own_prev*thread', 'own_next*thread',
        'fused*thread', 'coverage*thread', 'length*thread', 'fused_prev*thread', 'fused_next*thread',
        'rank_fused*thread', 'rank_dense*thread', 'rank_lexical*thread', 'centroid*thread', 'first*thread',
        'own_raw*thread', 'lexical_prev*thread', 'lexical_next*thread', 'coherence_prev*thread',
        'coherence_next*thread', 'lead*thread', 'subject*thread', 'context_cover*thread', 'named_subject*thread',
    ),
    mean=(
        0.231287, 0.32736, 0.2717, 0.355972, -0.238933, 0.192901, 0.196574, 0.11871, 0.115499, 0.555063, 0.155506,
        4.92219, 0.337953, 0.342565, 3.1438, 3.69562, 3.53091, 0.557811, 0.437092, 0.883648, 0.155313, 0.152872,
        0.494084, 0.507525, 0.130271, 0.541486, 0.0225575, 0.523633, 0.0125576, 0.0155263, 0.0139363, 0.0202881,
        -0.00913935, 0.0115832, 0.0117891, 0.00673535, 0.0065307, 0.0300851, 0.00908744, 0.216373, 0.0193123, 0.0194683,
        0.138591, 0.171758, 0.163514, 0.0287625, 0.023201, 0.0487039, 0.00837575, 0.00818431, 0.0247523, 0.0251954,
        0.00827397, 0.0344722, 0.00121588, 0.0349824,
    ),
    scale=(
        0.24949, 0.297203, 0.24296, 0.150191, 0.123764, 0.129806, 0.127003, 0.175243, 0.169119, 0.20863, 0.166502,
        0.541763, 0.196046, 0.188655, 0.893258, 1.32306, 1.26026, 0.160945, 0.172023, 0.996811, 0.177152, 0.17161,
        0.189843, 0.18003, 0.336601, 0.498276, 0.0512506, 0.499441, 0.0230749, 0.0291697, 0.0243862, 0.0224047,
        0.0144685, 0.015135, 0.0151811, 0.0154352, 0.0150882, 0.0355315, 0.0155679, 0.272103, 0.0252669, 0.0251098,
        0.182445, 0.222948, 0.209603, 0.0328988, 0.0270416, 0.0851064, 0.0167534, 0.0164436, 0.0308667, 0.0308776,
        0.0258667, 0.0443828, 0.00455984, 0.0436612,
    ),
    coef=(
        -0.138803, 0.447689, -0.267844, 0.363852, 0.441543, 0.317868, 0.190373, -0.242028, -0.206748, 0.367017,
        0.602686, 0.149499, 0.198583, -0.111999, -0.179372, -0.21479, 0.0243579, 0.113853, -0.0203407, 0.148844,
        0.267317, 0.19185, -0.476875, -0.0389397, -0.0505442, 0.211104, 0.11876, 1.11025, -0.131364, 0.591351,
        0.0502875, -0.422924, -0.654906, 0.220112, 0.240254, -0.0757091, 0.0265442, 0.00358156, -0.0530623, 1.39935,
        0.187442, -0.112454, -0.0453016, 0.0187013, 0.161383, 0.183467, -0.103977, -0.0719125, 0.168031, -0.245774,
        -0.879928, -0.00185465, 0.0870545, 0.274731, 0.438806, -0.188368,
    ),
    thread_span=(-0.131, 0.174),
)

#: with token states
TOKENS = Weights(
    features=(
        'own', 'window', 'lexical', 'dense', 'dense_gap', 'dense_prev', 'dense_next', 'own_prev', 'own_next', 'fused',
        'coverage', 'length', 'fused_prev', 'fused_next', 'rank_fused', 'rank_dense', 'rank_lexical', 'centroid',
        'first', 'own_raw', 'lexical_prev', 'lexical_next', 'coherence_prev', 'coherence_next', 'lead', 'subject',
        'context_cover', 'named_subject', 'own*thread', 'window*thread', 'lexical*thread', 'dense*thread',
        'dense_gap*thread', 'dense_prev*thread', 'dense_next*thread', 'own_prev*thread', 'own_next*thread',
        'fused*thread', 'coverage*thread', 'length*thread', 'fused_prev*thread', 'fused_next*thread',
        'rank_fused*thread', 'rank_dense*thread', 'rank_lexical*thread', 'centroid*thread', 'first*thread',
        'own_raw*thread', 'lexical_prev*thread', 'lexical_next*thread', 'coherence_prev*thread',
        'coherence_next*thread', 'lead*thread', 'subject*thread', 'context_cover*thread', 'named_subject*thread',
        'maxsim', 'maxsim*thread',
    ),
    mean=(
        0.231287, 0.32736, 0.2717, 0.355972, -0.238933, 0.192901, 0.196574, 0.11871, 0.115499, 0.555063, 0.155506,
        4.92219, 0.337953, 0.342565, 3.1438, 3.69562, 3.53091, 0.557811, 0.437092, 0.883648, 0.155313, 0.152872,
        0.494084, 0.507525, 0.130271, 0.541486, 0.0225575, 0.523633, 0.0125576, 0.0155263, 0.0139363, 0.0202881,
        -0.00913935, 0.0115832, 0.0117891, 0.00673535, 0.0065307, 0.0300851, 0.00908744, 0.216373, 0.0193123, 0.0194683,
        0.138591, 0.171758, 0.163514, 0.0287625, 0.023201, 0.0487039, 0.00837575, 0.00818431, 0.0247523, 0.0251954,
        0.00827397, 0.0344722, 0.00121588, 0.0349824, 0.395669, 0.0206105,
    ),
    scale=(
        0.24949, 0.297203, 0.24296, 0.150191, 0.123764, 0.129806, 0.127003, 0.175243, 0.169119, 0.20863, 0.166502,
        0.541763, 0.196046, 0.188655, 0.893258, 1.32306, 1.26026, 0.160945, 0.172023, 0.996811, 0.177152, 0.17161,
        0.189843, 0.18003, 0.336601, 0.498276, 0.0512506, 0.499441, 0.0230749, 0.0291697, 0.0243862, 0.0224047,
        0.0144685, 0.015135, 0.0151811, 0.0154352, 0.0150882, 0.0355315, 0.0155679, 0.272103, 0.0252669, 0.0251098,
        0.182445, 0.222948, 0.209603, 0.0328988, 0.0270416, 0.0851064, 0.0167534, 0.0164436, 0.0308667, 0.0308776,
        0.0258667, 0.0443828, 0.00455984, 0.0436612, 0.112315, 0.0233824,
    ),
    coef=(
        -0.194372, 0.454771, -0.265309, -0.157271, -0.190853, 0.338099, 0.175847, -0.251595, -0.205157, 0.241688,
        0.24268, -0.104323, 0.200651, -0.116457, -0.197405, -0.206595, 0.00907062, 0.0765715, -0.0272459, 0.110488,
        0.281936, 0.220624, -0.484989, -0.0454831, -0.0201867, 0.156721, 0.206347, 1.03859, -0.188599, 0.577006,
        0.0330154, -0.469144, -0.726477, 0.219569, 0.259623, -0.0894068, 0.00483718, -0.0143948, 0.0932188, 1.30307,
        0.140473, -0.129703, -0.128927, 0.0462569, 0.155645, 0.241101, -0.10285, -0.0978317, 0.192313, -0.282334,
        -0.876264, -0.0153424, 0.0528833, 0.227115, 0.454254, -0.140292, 1.79961, 0.384708,
    ),
    thread_span=(-0.131, 0.174),
)
