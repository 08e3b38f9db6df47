# The gateway a user would write instead of ours (issue 25's peer): FastAPI on
# uvicorn (uvloop, httptools) calling the engine over gRPC with grpcio's
# asyncio client. Same contract as POST /fn/product_recommender: a JSON body
# {"inputs": {"user_features": [[...64]] | {"data": [...], "shape": [1, 64]}}},
# an API key in X-API-Key, and {"outputs": {"scores": {shape, datatype, data}}};
# and POST /fn/image_search: the raw image body to search_pipeline_ensemble,
# {"outputs": {"embedding": {...}}} (bytes inline in gRPC: no shm staging).
# Stubs come from protocol/grpc_service.proto, generated with grpc_tools into
# a temp dir at start (test/bench/fastapi-peer.ts passes --stubs=DIR).
# Run: python3 fastapi_gateway.py --port=P --engine=unix:/path --stubs=DIR
import argparse, os, struct, sys

ap = argparse.ArgumentParser()
ap.add_argument('--port', type=int, required=True)
ap.add_argument('--engine', required=True)
ap.add_argument('--stubs', required=True)
ap.add_argument('--api-key', default=os.environ.get('RECOMMENDER_API_KEYS', ''))
args = ap.parse_args()
sys.path.insert(0, args.stubs)

import grpc  # noqa: E402
import uvicorn  # noqa: E402
from fastapi import FastAPI, Request  # noqa: E402
from fastapi.responses import JSONResponse  # noqa: E402
import grpc_service_pb2 as pb  # noqa: E402
import grpc_service_pb2_grpc as pbg  # noqa: E402

app = FastAPI()
state = {}


def flatten(v, out):
    if isinstance(v, list):
        for x in v:
            flatten(x, out)
    else:
        out.append(float(v))


@app.on_event('startup')
async def startup():
    state['stub'] = pbg.GRPCInferenceServiceStub(grpc.aio.insecure_channel(args.engine))


@app.post('/fn/product_recommender')
async def product_recommender(request: Request):
    if request.headers.get('x-api-key') not in args.api_key.split(','):
        return JSONResponse({'error': 'API key missing or invalid'}, status_code=401)
    body = await request.json()
    v = body['inputs']['user_features']
    data = v['data'] if isinstance(v, dict) else v
    flat = []
    flatten(data, flat)
    if len(flat) % 64:
        return JSONResponse({'error': 'user_features must hold rows of 64'}, status_code=400)
    rows = len(flat) // 64
    req = pb.ModelInferRequest(model_name='product_recommender_model')
    t = req.inputs.add()
    t.name, t.datatype = 'user_features', 'FP32'
    t.shape.extend([rows, 64])
    req.raw_input_contents.append(struct.pack(f'<{len(flat)}f', *flat))
    res = await state['stub'].ModelInfer(req, timeout=5)
    o = res.outputs[0]
    raw = res.raw_output_contents[0]
    return {'outputs': {'scores': {'shape': list(o.shape), 'datatype': o.datatype,
                                   'data': list(struct.unpack(f'<{len(raw) // 4}f', raw))}}}


@app.post('/fn/image_search')
async def image_search(request: Request):
    image = await request.body()
    req = pb.ModelInferRequest(model_name='search_pipeline_ensemble')
    t = req.inputs.add()
    t.name, t.datatype = 'RAW_IMAGE', 'UINT8'
    t.shape.extend([len(image)])
    req.raw_input_contents.append(image)
    res = await state['stub'].ModelInfer(req, timeout=30)
    o = res.outputs[0]
    raw = res.raw_output_contents[0]
    return {'outputs': {'embedding': {'shape': list(o.shape), 'datatype': o.datatype,
                                      'data': list(struct.unpack(f'<{len(raw) // 4}f', raw))}}}


uvicorn.run(app, host='127.0.0.1', port=args.port, loop='uvloop', http='httptools', log_level='warning', access_log=False)
